import Foundation

/// Reads a file descriptor line by line through a 1 MiB buffer, without copying a line that lies
/// whole in the buffer.
final class LineReader {
    private let descriptor: Int32
    private let chunk = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: 1 << 20)
    /// The bytes of `chunk` not handed out yet.
    private var start = 0, end = 0
    /// The start of a line that began in an earlier chunk.
    private var pending: [UInt8] = []
    private var atEnd = false
    /// The 1-based number of the line last handed out.
    private(set) var lineNumber = 0

    init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { chunk.deallocate() }

    /// Calls `body` with the next line, without its newline, and returns what it returns; `nil`
    /// at the end of the input. A last line without a newline counts too.
    func withNextLine<T>(_ body: (UnsafeBufferPointer<UInt8>) throws -> T) throws -> T? {
        while true {
            if start < end, let found = memchr(chunk.baseAddress! + start, 0x0A, end - start) {
                let newline = chunk.baseAddress!.distance(to: found.assumingMemoryBound(to: UInt8.self))
                lineNumber += 1
                let from = start
                start = newline + 1
                if pending.isEmpty { return try body(UnsafeBufferPointer(rebasing: chunk[from..<newline])) }
                pending.append(contentsOf: chunk[from..<newline])
                defer { pending.removeAll(keepingCapacity: true) }
                return try pending.withUnsafeBufferPointer(body)
            }
            pending.append(contentsOf: chunk[start..<end])
            (start, end) = (0, 0)
            if atEnd {
                if pending.isEmpty { return nil }
                lineNumber += 1
                defer { pending.removeAll() }
                return try pending.withUnsafeBufferPointer(body)
            }
            let count = read(descriptor, chunk.baseAddress, chunk.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw LoomToolError(.storeFailure, "Reading the dump failed: \(String(cString: strerror(errno))).")
            }
            if count == 0 { atEnd = true } else { end = count }
        }
    }
}
