// Sizes the three layouts issue 45 point 1 compares, with glibc's allocator: how many bytes
// of heap one loaded object of nine attributes takes, and how far apart consecutive objects'
// state lies (what a warm fetch walks). Stand-in classes with the instance sizes of Loom's:
// a `@Model` object is its header and two 8-byte slots (32 bytes), `_ObjectBacking` 96 bytes,
// a `StoredValue` 24 bytes (17 of data, 8-byte aligned).
//
//   swiftc -O Benchmarks/Scripts/object-layouts.swift -o /tmp/object-layouts
//   for layout in main backing object; do /tmp/object-layouts $layout; done
//
// Each layout runs in a process of its own, so that no freed chunk of another is reused.

@_silgen_name("malloc_usable_size") func mallocUsableSize(_ pointer: UnsafeMutableRawPointer) -> Int

enum Value { case null, integer(Int64), real(Double), text(String), blob([UInt8]) }
typealias Nine = (Value, Value, Value, Value, Value, Value, Value, Value, Value)
let nulls: Nine = (.null, .null, .null, .null, .null, .null, .null, .null, .null)
typealias Header = (Int, Int, Int, Int, Int, Int, Int, Int, Int, Int)

/// `main`: the object, its backing, and the values in an array of their own.
final class Object { var slot: UnsafeRawPointer?; var observation: UnsafeRawPointer? }
final class Backing { var fields: Header = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0) }
/// The branch `inline-values` (measured in Loom): the values in the backing's allocation.
final class BackingWithValues { var fields: Header = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0); var values = nulls }
/// Not built in Loom: the values in the `@Model` object.
final class ObjectWithValues { var slot: UnsafeRawPointer?; var observation: UnsafeRawPointer?; var values = nulls }

func usable(_ object: AnyObject) -> Int {
    mallocUsableSize(Unmanaged.passUnretained(object).toOpaque())
}
func address(_ object: AnyObject) -> Int {
    Int(bitPattern: Unmanaged.passUnretained(object).toOpaque())
}
/// glibc's chunk for `usable` bytes: the usable bytes and the 8-byte size field before them.
func chunk(_ usable: Int) -> Int { usable + 8 }

let layout = CommandLine.arguments.dropFirst().first ?? "main"
var kept: [AnyObject] = []
var chunks: [Int] = []
var stateStride = 0
for index in 0..<1_000 {
    let backing: AnyObject, object: AnyObject
    switch layout {
    case "backing": (backing, object) = (BackingWithValues(), Object())
    case "object": (backing, object) = (Backing(), ObjectWithValues())
    default: (backing, object) = (Backing(), Object())
    }
    kept += [backing, object]
    if index == 500 { stateStride = address(backing) }
    if index == 501 { stateStride = address(backing) - stateStride }
}
chunks = [chunk(usable(kept[0])), chunk(usable(kept[1]))]
if layout == "main" {
    // A fetch decodes all its rows before it makes their objects: the arrays lie together.
    let values = [Value](repeating: .null, count: 9)
    values.withUnsafeBufferPointer { buffer in
        // An array's 32-byte header lies before its elements.
        chunks.append(chunk(mallocUsableSize(UnsafeMutableRawPointer(mutating: buffer.baseAddress!) - 32)))
    }
}
print("\(layout): chunks \(chunks.map(String.init).joined(separator: " + ")) = \(chunks.reduce(0, +)) bytes an object; one backing to the next: \(stateStride) bytes")
