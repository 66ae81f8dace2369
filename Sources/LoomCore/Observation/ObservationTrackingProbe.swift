#if canImport(Glibc)
import Glibc
#endif
import Observation

/// Tells whether the current thread is inside `withObservationTracking` (or anything else that
/// tracks reads through the Observation framework), so that a `@Model` object makes its
/// `ObservationRegistrar` only for a read that something may observe.
///
/// An `ObservationRegistrar` costs three allocations, made and freed, for every object an app
/// reads, when only the reads inside a tracking scope
/// can ever lead to an observer. The Observation library keeps "a tracking scope is open" in a
/// thread-local value that only its own registrar reads, through `_swift_observation_tls_get`,
/// which Linux's `libswiftObservation.so` keeps out of its exported symbols. The library file
/// still lists it in its ELF symbol table, so the probe finds it there once: it finds the file
/// the loader mapped at an exported function's address (`/proc/self/maps`), reads the file's
/// `.symtab`, checks the address it computes for a second exported function against the
/// loader's, and then checks the function itself: nil-or-unchanged outside a new
/// `withObservationTracking` scope, a new value inside it. (The runtime declares it with Swift's
/// calling convention; for a function without parameters that cannot throw, returning a
/// pointer, that is C's on x86-64 and ARM64, the only architectures the probe runs on.)
/// Anything unexpected (another platform, a stripped or statically linked library, a future
/// runtime that works differently) leaves the probe unavailable, and objects then do what they
/// did without it: make their registrar on their first read.
///
/// Used by the accessors `@Model` generates (through ``ObservationSlot``); thread-safe.
@usableFromInline
enum ObservationTrackingProbe {
    /// A function that returns the Observation runtime's tracking state on the calling thread:
    /// nil outside every tracking scope.
    @usableFromInline
    typealias TrackingState = @convention(c) () -> UnsafeMutableRawPointer?

    /// The Observation runtime's own reader of its tracking state, found and checked once; `nil`
    /// where it could not be. Each object's ``ObservationSlot`` keeps a copy, which its reads use.
    @usableFromInline
    static let tracking: TrackingState? = locate()

    /// Whether the probe found and checked the runtime's tracking state, so that plain reads
    /// make no registrar (otherwise every read is treated as one that may be tracked).
    static var isAvailable: Bool { tracking != nil }

    /// Whether a read on this thread now may be observed, for `tracking` (an object's copy of
    /// ``tracking``): `false` only when it is known and no tracking scope is open.
    ///
    /// - Complexity: a call and a thread-local load.
    @inlinable @inline(__always)
    static func mayBeTracking(_ tracking: TrackingState?) -> Bool {
        guard let tracking else { return true }
        return tracking() != nil
    }

    private static func locate() -> TrackingState? {
        #if os(Linux) && canImport(Glibc) && (arch(x86_64) || arch(arm64))
        // Exported functions of the Observation library: where the loader put them tells which
        // file it mapped and where (the load base is an exported function's address less its
        // value in the file's symbol table).
        let exported = "$s11Observation0A9RegistrarVACycfC"   // ObservationRegistrar.init()
        let check = "$s11Observation0A8TrackingV11_AccessListVMa"   // ObservationTracking._AccessList's metadata accessor
        guard let handle = dlopen(nil, RTLD_NOW), let loaded = dlsym(handle, exported), let checked = dlsym(handle, check),
            let path = mappedFile(containing: loaded), let symbols = ELFSymbols(path: path),
            let exportedValue = symbols.functionValue(named: exported), let checkValue = symbols.functionValue(named: check),
            let value = symbols.functionValue(named: "_swift_observation_tls_get")
        else { return nil }
        let base = loaded.advanced(by: -Int(exportedValue))
        guard base.advanced(by: Int(checkValue)) == checked else { return nil }
        let function = unsafeBitCast(base.advanced(by: Int(value)), to: TrackingState.self)
        // The function must answer what the tracking state is: unchanged around a scope, a new
        // value inside one (nil outside every scope, so a first call from inside an app's own
        // scope is not mistaken).
        let outside = function()
        var inside: UnsafeMutableRawPointer?
        withObservationTracking { inside = function() } onChange: {}
        guard inside != nil, inside != outside, function() == outside else { return nil }
        return function
        #else
        return nil
        #endif
    }

    #if os(Linux) && canImport(Glibc)
    /// The file the loader mapped at `address`, from `/proc/self/maps` (read line by line: the
    /// file reports a size of zero, so a whole-file read stops after its first page).
    private static func mappedFile(containing address: UnsafeMutableRawPointer) -> String? {
        guard let maps = fopen("/proc/self/maps", "r") else { return nil }
        defer { fclose(maps) }
        var buffer: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(buffer) }
        let target = UInt(bitPattern: address)
        while getline(&buffer, &capacity, maps) > 0, let buffer {
            // start-end perms offset device inode path
            let line = String(cString: buffer)
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\n" })
            guard fields.count >= 6, let dash = fields[0].firstIndex(of: "-"),
                let start = UInt(fields[0][..<dash], radix: 16),
                let end = UInt(fields[0][fields[0].index(after: dash)...], radix: 16),
                start <= target, target < end
            else { continue }
            return fields[5...].joined(separator: " ")
        }
        return nil
    }
    #endif
}

#if os(Linux) && canImport(Glibc)
/// The function symbols of an ELF shared library's static symbol table (`.symtab`), read from
/// its file: 64-bit little-endian files only, anything else is refused.
private struct ELFSymbols {
    private let bytes: [UInt8]
    private let symbols: Range<Int>
    private let names: Range<Int>

    init?(path: String) {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var read: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            if count == 0 { break }
            read.append(contentsOf: chunk[0..<count])
            if read.count > 64 << 20 { return nil }   // not a small runtime library
        }
        let bytes = read
        // ELF magic, 64-bit, little-endian.
        guard bytes.count >= 64, bytes[0] == 0x7F, bytes[1] == 0x45, bytes[2] == 0x4C, bytes[3] == 0x46,
            bytes[4] == 2, bytes[5] == 1
        else { return nil }
        let sectionsOffset = Int(Self.load(UInt64.self, bytes, 0x28))
        let sectionSize = Int(Self.load(UInt16.self, bytes, 0x3A))
        let sectionCount = Int(Self.load(UInt16.self, bytes, 0x3C))
        guard sectionSize >= 64, sectionsOffset > 0, sectionsOffset + sectionSize * sectionCount <= bytes.count else { return nil }
        func section(_ index: Int) -> (type: UInt32, range: Range<Int>, link: Int)? {
            let at = sectionsOffset + index * sectionSize
            let offset = Int(Self.load(UInt64.self, bytes, at + 0x18))
            let size = Int(Self.load(UInt64.self, bytes, at + 0x20))
            guard offset >= 0, size >= 0, offset + size <= bytes.count else { return nil }
            return (Self.load(UInt32.self, bytes, at + 4), offset..<(offset + size), Int(Self.load(UInt32.self, bytes, at + 0x28)))
        }
        let symtabType: UInt32 = 2
        guard let symtab = (0..<sectionCount).lazy.compactMap(section).first(where: { $0.type == symtabType }),
            symtab.link < sectionCount, let strtab = section(symtab.link)
        else { return nil }
        self.bytes = bytes
        symbols = symtab.range
        names = strtab.range
    }

    /// The value (the address relative to the library's load base) of the function named
    /// `name`, if the table lists one.
    func functionValue(named name: String) -> UInt64? {
        let wanted = Array(name.utf8)
        let functionType: UInt8 = 2
        var at = symbols.lowerBound
        while at + 24 <= symbols.upperBound {
            defer { at += 24 }
            guard bytes[at + 4] & 0xF == functionType else { continue }
            let nameStart = names.lowerBound + Int(Self.load(UInt32.self, bytes, at))
            guard nameStart + wanted.count < names.upperBound, bytes[nameStart + wanted.count] == 0,
                bytes[nameStart..<(nameStart + wanted.count)].elementsEqual(wanted)
            else { continue }
            let value = Self.load(UInt64.self, bytes, at + 8)
            return value == 0 ? nil : value
        }
        return nil
    }

    private static func load<T: FixedWidthInteger>(_ type: T.Type, _ bytes: [UInt8], _ offset: Int) -> T {
        bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
    }
}
#endif
