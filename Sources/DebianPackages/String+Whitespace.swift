extension StringProtocol {
    /// The text without leading and trailing spaces, tabs and carriage returns.
    func trimmingWhitespace() -> SubSequence {
        var start = startIndex
        var end = endIndex
        while start < end, self[start].isControlFileWhitespace { start = index(after: start) }
        while end > start, self[index(before: end)].isControlFileWhitespace { end = index(before: end) }
        return self[start..<end]
    }
}

extension Character {
    var isControlFileWhitespace: Bool { self == " " || self == "\t" || self == "\r" }
}
