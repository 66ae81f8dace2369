/// Words of Loom's generated messages that depend on what they name.
package enum English {
    /// `thing` after the indefinite article its sound takes: "an integer64", "an Author",
    /// "a string", "a UUID", "a URL".
    ///
    /// Isolation: none (a pure function).
    package static func a(_ thing: Any) -> String {
        let word = String(describing: thing)
        return (startsWithVowelSound(word) ? "an " : "a ") + word
    }

    /// Whether `word` is read starting with a vowel sound, by its spelling: a, e, i, o or u,
    /// except where those letters are read "you" or "w" (UUID, URL, user, unique, one, Euro).
    static func startsWithVowelSound(_ word: String) -> Bool {
        let lower = word.lowercased()
        guard let first = lower.first, "aeiou".contains(first) else { return false }
        let consonantSounds = ["uu", "uri", "url", "uni", "use", "usa", "usu", "uti", "ure", "one", "eu"]
        return !consonantSounds.contains { lower.hasPrefix($0) }
    }
}
