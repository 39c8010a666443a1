import Foundation
import XCTest

/// A fresh temporary directory per test, removed afterwards.
final class TestDirectory {
    let path: String

    init() {
        let template = NSTemporaryDirectory() + "geosystem-test-XXXXXX"
        var bytes = Array(template.utf8CString)
        let result = bytes.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(result != nil, "mkdtemp failed")
        path = String(cString: bytes)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    func sub(_ name: String) -> String { path + "/" + name }

    func write(_ name: String, _ text: String) {
        write(name, Array(text.utf8))
    }

    func write(_ name: String, _ bytes: [UInt8]) {
        let p = sub(name)
        try? FileManager.default.createDirectory(atPath: (p as NSString).deletingLastPathComponent,
                                                 withIntermediateDirectories: true)
        precondition(FileManager.default.createFile(atPath: p, contents: Data(bytes)), "cannot write \(p)")
    }

    func read(_ name: String) -> String? {
        guard let d = FileManager.default.contents(atPath: sub(name)) else { return nil }
        return String(decoding: d, as: UTF8.self)
    }

    func list(_ name: String = "") -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: name.isEmpty ? path : sub(name))) ?? []).sorted()
    }

    func mode(_ name: String) -> Int {
        var st = stat()
        guard stat(sub(name), &st) == 0 else { return -1 }
        return Int(st.st_mode & 0o7777)
    }
}
