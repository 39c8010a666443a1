/// Writes D-Bus messages in the wire format (little-endian), in Swift.
///
/// Why: libdbus rewrites the header's SIGNATURE field at every top-level
/// argument appended to a message (and at every top-level container closed),
/// which moves the header each time; a `PropertiesChanged` (three top-level
/// arguments) cost the GeoClue facade some 15 µs per client and fix, a third
/// of its processor time at 100 clients (perf, docs/performance.md). Written
/// here in one pass, a signal is then handed to libdbus whole
/// (`Message.signal(wire:)`, `dbus_message_demarshal`), which checks every
/// byte of it as it checks a message read from the bus: a mistake here yields
/// no message (the caller then builds it the usual way), never a wrong one
/// on the wire.
///
/// Only what needs no descriptor: `unixFD` values are not written.
struct WireEncoder {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    /// Pads with zero bytes to a multiple of `n` (from the message's start).
    mutating func align(_ n: Int) {
        let pad = (n - bytes.count % n) % n
        if pad > 0 { bytes.append(contentsOf: repeatElement(0, count: pad)) }
    }

    mutating func uint32(_ v: UInt32) {
        align(4)
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    private mutating func fixed<T: FixedWidthInteger>(_ v: T) {
        align(MemoryLayout<T>.size)
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    private mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            uint32(UInt32(utf8.count))
            bytes.append(contentsOf: utf8)
        }
        bytes.append(0)
    }

    /// A signature: one length byte, the text, a NUL (at most 255 bytes).
    @discardableResult
    mutating func signature(_ s: String) -> Bool {
        let utf8 = Array(s.utf8)
        guard utf8.count <= 255 else { return false }
        bytes.append(UInt8(utf8.count))
        bytes.append(contentsOf: utf8)
        bytes.append(0)
        return true
    }

    /// The alignment of a value of the type that `signature` starts with.
    static func alignment(of signature: Substring) -> Int {
        switch signature.first {
        case "n", "q": return 2
        case "x", "t", "d", "(", "{": return 8
        case "y", "g", "v": return 1
        default: return 4   // b, i, u, h, s, o, a
        }
    }

    /// Writes `value`; false for what it does not write (descriptors) or
    /// cannot (a signature over 255 bytes).
    mutating func value(_ value: DBusValue) -> Bool {
        switch value {
        case .byte(let v): bytes.append(v)
        case .bool(let v): uint32(v ? 1 : 0)
        case .int16(let v): fixed(v)
        case .uint16(let v): fixed(v)
        case .int32(let v): fixed(v)
        case .uint32(let v): uint32(v)
        case .int64(let v): fixed(v)
        case .uint64(let v): fixed(v)
        case .double(let v): fixed(v.bitPattern)
        case .string(let s), .objectPath(let s): string(s)
        case .signature(let s): return signature(s)
        case .unixFD: return false
        case .array(let element, let items):
            // Items of another type than the array's are refused, as libdbus's appending refuses them.
            return array(elementAlignment: WireEncoder.alignment(of: Substring(element))) {
                for item in items where item.signature != element || !$0.value(item) { return false }
                return true
            }
        case .dict(let key, let valueType, let entries):
            return array(elementAlignment: 8) {
                for e in entries {
                    $0.align(8)
                    guard e.key.signature == key, e.value.signature == valueType,
                          $0.value(e.key), $0.value(e.value) else { return false }
                }
                return true
            }
        case .structure(let fields):
            align(8)
            for f in fields where !self.value(f) { return false }
        case .variant(let inner):
            guard signature(inner.signature) else { return false }
            return self.value(inner)
        }
        return true
    }

    /// An array: its length (bytes of the elements, not counting the padding
    /// before the first), then the elements `body` writes.
    private mutating func array(elementAlignment: Int, _ body: (inout WireEncoder) -> Bool) -> Bool {
        uint32(0)
        let lengthAt = bytes.count - 4
        align(elementAlignment)
        let start = bytes.count
        guard body(&self), bytes.count - start <= WireEncoder.maxArrayBytes else { return false }
        let length = UInt32(bytes.count - start)
        withUnsafeBytes(of: length.littleEndian) { bytes.replaceSubrange(lengthAt..<lengthAt + 4, with: $0) }
        return true
    }

    /// The largest array and message the specification allows (64 and 128 MiB).
    static let maxArrayBytes = 1 << 26
    static let maxMessageBytes = 1 << 27

    /// Header field codes (the D-Bus specification, "Header Fields").
    enum Field: UInt8 {
        case path = 1, interface = 2, member = 3, destination = 6, signature = 8
    }

    /// A whole signal message: the header with `fields` in the order given,
    /// then the body of `args`. `serial` must not be 0 (the reader rejects it).
    static func signal(path: String, interface: String, member: String, destination: String?,
                       _ args: [DBusValue], serial: UInt32 = 1) -> [UInt8]? {
        var body = WireEncoder()
        var signature = ""
        for a in args {
            guard body.value(a), body.bytes.count <= maxMessageBytes else { return nil }
            signature += a.signature
        }
        var m = WireEncoder(capacity: 128 + body.bytes.count)
        // 'l' little-endian, signal, NO_REPLY_EXPECTED (as libdbus marks signals), version 1.
        m.bytes.append(contentsOf: [UInt8(ascii: "l"), 4, 1, 1])
        m.uint32(UInt32(body.bytes.count))
        m.uint32(serial)
        var fields: [(Field, DBusValue)] = [(.path, .objectPath(path)), (.interface, .string(interface)),
                                            (.member, .string(member))]
        if let destination { fields.append((.destination, .string(destination))) }
        if !signature.isEmpty { fields.append((.signature, .signature(signature))) }
        let ok = m.array(elementAlignment: 8) { h in
            for (code, v) in fields {
                h.align(8)
                h.bytes.append(code.rawValue)
                guard h.value(.variant(v)) else { return false }
            }
            return true
        }
        guard ok else { return nil }
        // The body starts 8-aligned; its own alignment was counted from 0, which is the same.
        m.align(8)
        m.bytes.append(contentsOf: body.bytes)
        return m.bytes.count <= maxMessageBytes ? m.bytes : nil
    }
}
