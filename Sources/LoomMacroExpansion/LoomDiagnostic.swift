import SwiftDiagnostics

/// A mistake that one of Loom's macros found in the code it is attached to.
///
/// Every message says what is wrong and how to fix it, so that it reads well on its own in an
/// editor. The identifier names the check, so tests and tools can match it without the wording.
struct LoomDiagnostic: DiagnosticMessage {
    let message: String
    let diagnosticID: MessageID
    let severity: DiagnosticSeverity

    private init(_ id: String, _ message: String, severity: DiagnosticSeverity = .error) {
        self.message = message
        self.diagnosticID = MessageID(domain: "Loom", id: id)
        self.severity = severity
    }

    static let notAClass = LoomDiagnostic("notAClass", "@Model can only be applied to a class")

    static let genericClass = LoomDiagnostic(
        "genericClass", "@Model can't be applied to a generic class; Loom needs one entity per model class")

    static let abstractNotALiteral = LoomDiagnostic(
        "abstractNotALiteral", "@Model(abstract:) takes the literal true or false")

    static let persistentLet = LoomDiagnostic(
        "persistentLet",
        "persistent properties must be 'var'; mark it @Transient to keep it out of the store")

    static func missingType(_ name: String) -> LoomDiagnostic {
        LoomDiagnostic("missingType", "add an explicit type to '\(name)' so Loom can store it")
    }

    static let transientWithoutInitialValue = LoomDiagnostic(
        "transientWithoutInitialValue", "a @Transient property needs an initial value")

    static let observedProperty = LoomDiagnostic(
        "observedProperty",
        "persistent properties can't have 'willSet' or 'didSet'; mark it @Transient to keep it out of the store")

    static let multipleBindings = LoomDiagnostic(
        "multipleBindings", "declare each persistent property in its own 'var' so Loom can store it")

    static func notInModel(_ macro: String) -> LoomDiagnostic {
        LoomDiagnostic("notInModel", "#\(macro) can only be used in the body of a @Model class")
    }

    static func wrongModelType(_ macro: String, written: String, expected: String) -> LoomDiagnostic {
        LoomDiagnostic(
            "wrongModelType", "#\(macro)<\(written)> in '\(expected)' must name its own class: write #\(macro)<\(expected)>")
    }

    static func notAKeyPathArray(_ macro: String) -> LoomDiagnostic {
        LoomDiagnostic(
            "notAKeyPathArray", "each argument of #\(macro) must be an array of key paths, such as [\\.title, \\.author]")
    }

    static func emptyKeyPathArray(_ macro: String) -> LoomDiagnostic {
        LoomDiagnostic("emptyKeyPathArray", "#\(macro) needs at least one key path in each array")
    }

    static func notAPropertyKeyPath(_ macro: String) -> LoomDiagnostic {
        LoomDiagnostic(
            "notAPropertyKeyPath", "#\(macro) key paths must name one property of the model, such as \\.title")
    }

    static func notPersistent(_ macro: String, property: String, model: String) -> LoomDiagnostic {
        LoomDiagnostic(
            "notPersistent",
            "#\(macro) can't use '\(property)': it is not a persistent property of '\(model)'")
    }
}

/// The text of a Fix-It that one of Loom's macros offers.
struct LoomFixIt: FixItMessage {
    let message: String
    let fixItID: MessageID

    private init(_ id: String, _ message: String) {
        self.message = message
        self.fixItID = MessageID(domain: "Loom", id: id)
    }

    static let replaceLetWithVar = LoomFixIt("replaceLetWithVar", "replace 'let' with 'var'")
    static let addTransient = LoomFixIt("addTransient", "mark it @Transient")
}
