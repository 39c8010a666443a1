import CIntl
import Glibc

/// geoconsentctl's messages in the user's language: gettext, domain
/// `geoconsent` (the catalogs of po/, shared with the desktop programs). The
/// one file that calls libintl. Only messages follow the locale: numbers,
/// times and JSON stay as they are (LC_NUMERIC is left alone), so that
/// scripts read the same output in every language.
enum Localization {
    static let domain = "geoconsent"

    /// Binds the domain to the catalogs beside the program: PREFIX/share/locale
    /// for PREFIX/bin/geoconsentctl, or the checkout's .build/locale for a
    /// build in .build/TRIPLE/CONFIG/ (scripts/po-check.sh compiles them
    /// there); else the C library's default directory.
    static func start() {
        setlocale(LC_MESSAGES, "")
        setlocale(LC_CTYPE, "")
        if let dir = catalogDirectory() { bindtextdomain(domain, dir) }
        bind_textdomain_codeset(domain, "UTF-8")
    }

    private static func catalogDirectory() -> String? {
        guard let exe = realpath("/proc/self/exe", nil) else { return nil }
        defer { free(exe) }
        let path = String(cString: exe)
        let bin = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
        for candidate in [bin + "/../share/locale", bin + "/../../locale"] {
            var st = stat()
            if stat(candidate, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR { return candidate }
        }
        return nil
    }
}

/// The translation of `msgid`, with each `{name}` replaced by `args[name]`.
/// A literal, so that `scripts/extract-swift-strings.py` finds every message.
func tr(_ msgid: StaticString, _ args: [String: String] = [:]) -> String {
    // A StaticString literal is NUL-terminated UTF-8 that lives as long as the program.
    let text = msgid.utf8Start.withMemoryRebound(to: CChar.self, capacity: msgid.utf8CodeUnitCount + 1) {
        String(cString: dgettext(Localization.domain, $0))
    }
    return fill(text, args)
}

/// One pass over the template: a value is inserted as it is and never
/// scanned again, so an app id that contains `{pid}` shows as written (it
/// could otherwise make the prompt say what its author wants).
private func fill(_ text: String, _ args: [String: String]) -> String {
    guard !args.isEmpty else { return text }
    var out = ""
    var rest = Substring(text)
    while let open = rest.firstIndex(of: "{") {
        out += rest[..<open]
        let after = rest[rest.index(after: open)...]
        if let close = after.firstIndex(of: "}"), let value = args[String(after[..<close])] {
            out += value
            rest = after[after.index(after: close)...]
        } else {
            out += "{"
            rest = after
        }
    }
    return out + rest
}
