import Foundation

/// Reads a file descriptor line by line through a 1 MiB buffer, without copying a line that lies
/// whole in the buffer.
///
/// Lines end with LF or CRLF (the CR is not part of the line), and a UTF-8 byte order mark at the
/// start of the input is not part of the first line: a dump edited or saved on Windows reads as
/// the same lines.
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
        try withNextRawLine { line in try body(trimmed(line)) }
    }

    /// `line` without the CR of a CRLF ending and, on the first line, without a byte order mark.
    private func trimmed(_ line: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        var from = 0, to = line.count
        if lineNumber == 1, to >= 3, line[0] == 0xEF, line[1] == 0xBB, line[2] == 0xBF { from = 3 }
        if to > from, line[to - 1] == 0x0D { to -= 1 }
        return UnsafeBufferPointer(rebasing: line[from..<to])
    }

    /// ``withNextLine(_:)`` with the line as it is in the input, up to its LF.
    private func withNextRawLine<T>(_ body: (UnsafeBufferPointer<UInt8>) throws -> T) throws -> T? {
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
