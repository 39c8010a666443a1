import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory `/tmp/geoconsent-test.XXXXXX` (mode 0700), removed
/// recursively on `remove()` or deinit.
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
    }

    deinit { remove() }

    /// `path/name`.
    public func file(_ name: String) -> String { path + "/" + name }

    /// Removes the directory and everything in it. Idempotent.
    public func remove() {
        lock.lock(); defer { lock.unlock() }
        if removed { return }
        removed = true
        if let keep = ProcessInfo.processInfo.environment["GEOCONSENT_KEEP_TEMP"], !keep.isEmpty, keep != "0" {
            FileHandle.standardError.write(Data("geoconsent-test: keeping \(path)\n".utf8))
            return
        }
        try? FileManager.default.removeItem(atPath: path)
    }
}
