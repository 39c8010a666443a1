import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory `/tmp/geoconsent-test.XXXXXX` (mode 0700), removed
/// recursively on `remove()` or deinit.
///
/// Directories still alive when the process exits (a test that failed before
/// releasing one) are removed by an `atexit` handler; only a crash leaves them.
///
/// Set `GEOCONSENT_KEEP_TEMP=1` to keep every such directory for a post-mortem
/// (the path is printed to stderr instead of being removed).
public final class TempDir: @unchecked Sendable {
    /// Absolute path of the directory.
    public let path: String
    private let lock = NSLock()
    private var removed = false

    /// Creates the directory. Throws if `mkdtemp` fails.
    public init() throws {
        var template = Array("/tmp/geoconsent-test.XXXXXX".utf8CString)
        let ok = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) != nil }
        guard ok else { throw HarnessError("mkdtemp: \(String(cString: strerror(errno)))") }
        path = String(cString: template)
        TempDir.register(path)
    }

    private static let registryLock = NSLock()
    nonisolated(unsafe) private static var live = Set<String>()
    nonisolated(unsafe) private static var atexitInstalled = false

    private static func register(_ path: String) {
        registryLock.lock(); defer { registryLock.unlock() }
        live.insert(path)
        if !atexitInstalled {
            atexitInstalled = true
            atexit { TempDir.removeAllLive() }
        }
    }

    private static func unregister(_ path: String) {
        registryLock.lock(); defer { registryLock.unlock() }
        live.remove(path)
    }

    private static func removeAllLive() {
        registryLock.lock()
        let paths = live
        live.removeAll()
        registryLock.unlock()
        guard !keepRequested else { return }
        for p in paths { try? FileManager.default.removeItem(atPath: p) }
    }

    private static var keepRequested: Bool {
        guard let keep = ProcessInfo.processInfo.environment["GEOCONSENT_KEEP_TEMP"] else { return false }
        return !keep.isEmpty && keep != "0"
    }

    deinit { remove() }

    /// `path/name`.
    public func file(_ name: String) -> String { path + "/" + name }

    /// Removes the directory and everything in it. Idempotent.
    public func remove() {
        lock.lock(); defer { lock.unlock() }
        if removed { return }
        removed = true
        TempDir.unregister(path)
        if TempDir.keepRequested {
            FileHandle.standardError.write(Data("geoconsent-test: keeping \(path)\n".utf8))
            return
        }
        try? FileManager.default.removeItem(atPath: path)
    }
}
