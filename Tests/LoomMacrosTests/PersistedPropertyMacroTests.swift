import SwiftSyntaxMacroExpansion
import Testing

@Suite struct PersistedPropertyMacroTests {
    @Test func propertyWithoutInitialValueGetsOnlyGetAndSet() {
        assertLoomExpansion(
            """
            @_PersistedProperty(index: 7) var title: String
            """,
            expandedSource: """
                var title: String {
                    get {
                        _loomObservation.access(self, keyPath: \\.title)
                        return _loomWithBacking {
                            $0.value(at: Self._loomPropertyOffset &+ 7, as: String.self)
                        }
                    }
                    set {
                        _loomObservation.withMutation(of: self, keyPath: \\.title) {
                            _loomWithBacking {
                                $0.setValue(newValue, at: Self._loomPropertyOffset &+ 7, of: self)
                            }
                        }
                    }
                }
                """)
    }

    @Test func propertyWithInitialValueAlsoGetsAnEmptyInitAccessor() {
        assertLoomExpansion(
            """
            @_PersistedProperty(index: 0) var pages: Int = 0
            """,
            expandedSource: """
                var pages: Int {
                    init(initialValue) {
                    }
                    get {
                        _loomObservation.access(self, keyPath: \\.pages)
                        return _loomWithBacking {
                            $0.value(at: Self._loomPropertyOffset &+ 0, as: Int.self)
                        }
                    }
                    set {
                        _loomObservation.withMutation(of: self, keyPath: \\.pages) {
                            _loomWithBacking {
                                $0.setValue(newValue, at: Self._loomPropertyOffset &+ 0, of: self)
                            }
                        }
                    }
                }
                """)
    }

    @Test(arguments: [
        ("[String: [Int]]", "[String: [Int]]"),
        ("Int!", "Int?"),
        ("any Codable", "(any Codable)"),
        ("(any Codable)?", "(any Codable)?"),
        ("Swift.Result<Int, any Error>", "Swift.Result<Int, any Error>"),
    ])
    func typeIsWrittenSoThatDotSelfParses(written: String, metatype: String) {
        assertLoomExpansion(
            """
            @_PersistedProperty(index: 1) var value: \(written)
            """,
            expandedSource: """
                var value: \(written) {
                    get {
                        _loomObservation.access(self, keyPath: \\.value)
                        return _loomWithBacking {
                            $0.value(at: Self._loomPropertyOffset &+ 1, as: \(metatype).self)
                        }
                    }
                    set {
                        _loomObservation.withMutation(of: self, keyPath: \\.value) {
                            _loomWithBacking {
                                $0.setValue(newValue, at: Self._loomPropertyOffset &+ 1, of: self)
                            }
                        }
                    }
                }
                """)
    }
}
