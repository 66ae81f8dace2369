import Foundation
import Loom
import LoomPostgreSQL
import Testing

// The code between the markers is README.md's example of an encrypted PostgreSQL connection,
// checked line for line by scripts/check-readme.py.

// BEGIN README POSTGRESQL SECURITY
/// An app server on another machine than the database: encrypted, the server's certificate
/// checked against the database's own authority, and no password in the code or the URL
/// (it comes from PGPASSWORD or ~/.pgpass, a file of host:port:database:user:password lines
/// that only its owner may read).
func libraryConfiguration() throws -> PostgreSQLStore.Configuration {
    try PostgreSQLStore.Configuration(
        url: "postgres://app@db.internal:5432/library?schema=books&sslmode=verify-full&sslrootcert=/etc/loom/db-ca.pem")
}
// END README POSTGRESQL SECURITY

@Test("README: the encrypted configuration verifies the full certificate against the CA file, with no password in it")
func readmePostgreSQLSecurity() throws {
    let configuration = try libraryConfiguration()
    #expect(configuration.sslMode == .verifyFull)
    #expect(configuration.sslRootCertificate == "/etc/loom/db-ca.pem")
    #expect(configuration.password == nil)
    #expect(configuration.endpoint == .tcp(host: "db.internal", port: 5432))
    // Without the authority's file, no connection is tried: the error names the file.
    let error = try #require(throws: LoomError.self) { try configuration.connectionConfiguration }
    #expect(error.message.contains("/etc/loom/db-ca.pem"))
}
