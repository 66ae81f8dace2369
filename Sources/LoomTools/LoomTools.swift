/// What the `loom` command-line tool does, as a library: the tool's verbs are thin shells over
/// these types, and the tests drive them both directly and through the built executable.
///
/// Every verb works without the application's model (it reads the schema saved in the store),
/// opens a store another process may have open, and writes only when the verb is one that writes.
package enum LoomTools {}
