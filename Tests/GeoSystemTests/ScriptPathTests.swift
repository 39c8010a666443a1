import XCTest
@testable import GeoSystem

/// An interpreter's scripts are apps of their own: the script is read from
/// the command line as the kernel's `#!` handling and `env` leave it.
final class ScriptPathTests: XCTestCase {
    private func script(_ args: [String], _ exe: String = "/usr/bin/python3.11", cwd: String? = "/home/ann") -> String? {
        guard let interpreter = ScriptPath.interpreter(exe) else { return nil }
        let bytes: [UInt8] = args.flatMap { Array($0.utf8) + [UInt8(0)] }
        return ScriptPath.script(inCommandLine: bytes, of: interpreter, cwd: cwd)
    }

    func testInterpretersAreKnownByTheirInstalledNames() {
        for exe in ["/usr/bin/python3.11", "/usr/bin/python3", "/usr/bin/python3.13-dbg", "/usr/bin/perl", "/usr/bin/perl5.36.0",
                    "/usr/bin/gjs-console", "/usr/bin/gjs", "/usr/bin/bash", "/usr/bin/dash", "/usr/bin/node", "/usr/bin/lua5.4",
                    "/usr/bin/ruby3.1", "/usr/bin/tclsh8.6", "/usr/bin/pypy3"] {
            XCTAssertNotNil(ScriptPath.interpreter(exe), exe)
        }
        for exe in ["/usr/lib/firefox-esr/firefox-esr", "/usr/bin/pythonista", "/usr/bin/shred", "/usr/bin/sha1sum",
                    "/usr/bin/perlbug", "/usr/bin/bashbug", "python3", "/usr/bin/gnome-maps"] {
            XCTAssertNil(ScriptPath.interpreter(exe), exe)
        }
        XCTAssertEqual(ScriptPath.interpreter("/usr/bin/gjs-console"), .gjs)
        XCTAssertEqual(ScriptPath.interpreter("/usr/bin/nodejs"), .node)
    }

    func testTheScriptOfACommandLine() {
        // What `#!/usr/bin/python3` gives, and what `#!/usr/bin/env python3` gives.
        XCTAssertEqual(script(["/usr/bin/python3", "/usr/bin/meld", "--diff"]), "/usr/bin/meld")
        XCTAssertEqual(script(["python3", "/usr/bin/meld"]), "/usr/bin/meld")
        // A shebang's own option, run-together flags, an option with a value, `--`.
        XCTAssertEqual(script(["/usr/bin/python3", "-Es", "/usr/sbin/tool"]), "/usr/sbin/tool")
        XCTAssertEqual(script(["python3", "-W", "ignore", "/opt/app/main.py"]), "/opt/app/main.py")
        XCTAssertEqual(script(["python3", "--", "/opt/app/main.py"]), "/opt/app/main.py")
        // Relative to the working directory, tidied; `..` cannot be told without the file system.
        XCTAssertEqual(script(["python3", "./maps.py"]), "/home/ann/maps.py")
        XCTAssertEqual(script(["python3", "src//maps.py"]), "/home/ann/src/maps.py")
        XCTAssertEqual(script(["python3", "maps.py"], cwd: "/"), "/maps.py")
        XCTAssertNil(script(["python3", "../maps.py"]))
        XCTAssertNil(script(["python3", "maps.py"], cwd: nil))
        XCTAssertNil(script(["python3", "maps.py"], cwd: "/home/ann/gone (deleted)"))
        // Code of no file: in the command line, a module, standard input, or nothing.
        XCTAssertNil(script(["python3", "-c", "print(1)", "/usr/bin/meld"]))
        XCTAssertNil(script(["python3", "-Ic", "print(1)"]))
        // Code attached to its option runs too, whatever operand follows it.
        XCTAssertNil(script(["python3", "-cimport os", "/usr/bin/meld"]))
        XCTAssertNil(script(["python3", "-Icimport os", "/usr/bin/meld"]))
        XCTAssertNil(script(["perl", "-eprint 1", "/usr/bin/x"], "/usr/bin/perl"))
        XCTAssertNil(script(["node", "--eval=1", "/srv/app.js"], "/usr/bin/node"))
        XCTAssertNil(script(["lua", "-eprint(1)", "/usr/bin/x"], "/usr/bin/lua5.4"))
        XCTAssertNil(script(["gjs", "-cprint(1)", "/usr/bin/gnome-maps"], "/usr/bin/gjs"))
        XCTAssertEqual(script(["python3", "-Wignore", "/usr/bin/meld"]), "/usr/bin/meld", "a value attached")
        XCTAssertEqual(script(["python3", "-uW", "ignore", "/usr/bin/meld"]), "/usr/bin/meld", "its value the next word")
        XCTAssertEqual(script(["node", "--require=x", "/srv/app.js"], "/usr/bin/node"), "/srv/app.js")
        XCTAssertNil(script(["python3", "-m", "http.server"]))
        XCTAssertNil(script(["python3", "-"]))
        XCTAssertNil(script(["python3"]))
        XCTAssertNil(script([]))
        // Each family reads its own options.
        XCTAssertNil(script(["perl", "-e", "print 1"], "/usr/bin/perl"))
        XCTAssertEqual(script(["perl", "-w", "/usr/bin/cpan"], "/usr/bin/perl"), "/usr/bin/cpan")
        XCTAssertNil(script(["sh", "-c", "exec x"], "/usr/bin/dash"))
        XCTAssertEqual(script(["sh", "+o", "errexit", "/usr/bin/ls-app"], "/usr/bin/dash"), "/usr/bin/ls-app")
        XCTAssertEqual(script(["gjs", "-I", "/usr/share/maps", "/usr/bin/gnome-maps"], "/usr/bin/gjs-console"),
                       "/usr/bin/gnome-maps")
        XCTAssertEqual(script(["node", "--require", "x", "/srv/app.js"], "/usr/bin/node"), "/srv/app.js")
        // Bytes that are not UTF-8 still make a path (shown with replacement characters).
        XCTAssertEqual(ScriptPath.script(inCommandLine: Array("python3\0/usr/bin/m".utf8) + [0xFF, 0],
                                         of: .python, cwd: nil), "/usr/bin/m\u{FFFD}")
    }
}
