import Foundation
import Loom
@testable import LoomCore
@testable import LoomPostgreSQL
import Testing

/// The security settings of a PostgreSQL configuration, without a server: libpq's `sslmode`,
/// `sslrootcert`, `password` and `passfile` in a URL and in the environment, the password file's
/// format and permissions, and passwords kept out of messages. The same settings against real
/// servers: ``PostgreSQLSecureConnectionTests``.
@Suite struct PostgreSQLConnectionSettingsTests {
    /// A folder of its own for files the test writes, deleted after.
    final class Folder {
        let path: String
        init() throws {
            path = FileManager.default.temporaryDirectory.appendingPathComponent("loom-settings-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }

        /// Writes `text` to `name` with `permissions`; returns its path.
        func write(_ name: String, _ text: String, permissions: Int = 0o600) throws -> String {
            let file = path + "/" + name
            try Data(text.utf8).write(to: URL(filePath: file))
            try FileManager.default.setAttributes([.posixPermissions: permissions], ofItemAtPath: file)
            return file
        }
    }

    @Test("sslmode, sslrootcert, password and passfile are read from the URL; the mode defaults to prefer, as libpq's")
    func securityParametersFromURL() throws {
        let plain = try PostgreSQLStore.Configuration(url: "postgres://app@db.internal/library", environment: [:])
        #expect(plain.sslMode == .prefer)
        #expect(plain.sslRootCertificate == nil)
        #expect(plain.password == nil)
        #expect(plain.passwordFile == nil)
        for mode in PostgreSQLStore.Configuration.SSLMode.allCases {
            let configuration = try PostgreSQLStore.Configuration(url: "postgres://app@db.internal/library?sslmode=\(mode.rawValue)", environment: [:])
            #expect(configuration.sslMode == mode)
        }
        let full = try PostgreSQLStore.Configuration(
            url: "postgresql://app@db.internal:6543/library?schema=books&sslmode=verify-full&sslrootcert=/etc/loom/ca.pem&password=s3cret&passfile=/etc/loom/pgpass",
            environment: [:])
        #expect(full.sslMode == .verifyFull)
        #expect(full.sslRootCertificate == "/etc/loom/ca.pem")
        #expect(full.password == "s3cret")
        #expect(full.passwordFile == "/etc/loom/pgpass")
        #expect(full.schemaName == "books")
        // A password in the userinfo wins over the parameter, as libpq's.
        #expect(try PostgreSQLStore.Configuration(url: "postgres://app:first@db/library?password=second", environment: [:]).password == "first")
        // A percent-encoded password is decoded.
        #expect(try PostgreSQLStore.Configuration(url: "postgres://app:p%40ss%3Aw@db/library", environment: [:]).password == "p@ss:w")
    }

    @Test("PGSSLMODE and PGSSLROOTCERT are defaults the URL overrides; sslrootcert=system makes verify-full the default")
    func securityParametersFromEnvironment() throws {
        let environment = ["PGSSLMODE": "verify-ca", "PGSSLROOTCERT": "/env/ca.pem"]
        let fromEnvironment = try PostgreSQLStore.Configuration(url: "postgres://app@db/library", environment: environment)
        #expect(fromEnvironment.sslMode == .verifyCA)
        #expect(fromEnvironment.sslRootCertificate == "/env/ca.pem")
        let overridden = try PostgreSQLStore.Configuration(url: "postgres://app@db/library?sslmode=require&sslrootcert=/url/ca.pem", environment: environment)
        #expect(overridden.sslMode == .require)
        #expect(overridden.sslRootCertificate == "/url/ca.pem")
        #expect(try PostgreSQLStore.Configuration(url: "postgres://app@db/library?sslrootcert=system", environment: [:]).sslMode == .verifyFull)
        // Empty variables are unset ones.
        #expect(try PostgreSQLStore.Configuration(url: "postgres://app@db/library", environment: ["PGSSLMODE": ""]).sslMode == .prefer)
    }

    @Test("An unknown sslmode is refused naming it and where it came from; allow is refused saying what to use")
    func unknownSSLMode() throws {
        let unknown = try #require(throws: LoomError.self) {
            try PostgreSQLStore.Configuration(url: "postgres://app@db/library?sslmode=verify_full", environment: [:])
        }
        #expect(unknown.code == .invalidRequest)
        #expect(unknown.message.contains("\"verify_full\""))
        #expect(unknown.message.contains("the URL's sslmode"))
        #expect(unknown.message.contains("verify-full"))
        let fromEnvironment = try #require(throws: LoomError.self) {
            try PostgreSQLStore.Configuration(url: "postgres://app@db/library", environment: ["PGSSLMODE": "REQUIRE"])
        }
        #expect(fromEnvironment.message.contains("\"REQUIRE\""))
        #expect(fromEnvironment.message.contains("PGSSLMODE"))
        let allow = try #require(throws: LoomError.self) {
            try PostgreSQLStore.Configuration(url: "postgres://app@db/library?sslmode=allow", environment: [:])
        }
        #expect(allow.code == .invalidRequest)
        #expect(allow.message.contains("\"allow\""))
        #expect(allow.message.contains("prefer"))
    }

    @Test("Verifying modes without a readable certificate authority are refused before connecting, naming the file")
    func unusableRootCertificates() throws {
        let folder = try Folder()
        var configuration = PostgreSQLStore.Configuration(endpoint: .tcp(host: "db.internal", port: 5432), username: "app")
        let home = ["HOME": folder.path]   // no ~/.postgresql/root.crt there
        for mode in [PostgreSQLStore.Configuration.SSLMode.verifyCA, .verifyFull] {
            configuration.sslMode = mode
            configuration.sslRootCertificate = nil
            let none = try #require(throws: LoomError.self) { try configuration.makeConnectionConfiguration(environment: home) }
            #expect(none.code == .invalidRequest)
            #expect(none.message.contains("sslmode \(mode.rawValue)"))
            #expect(none.message.contains("sslrootcert"))
            configuration.sslRootCertificate = folder.path + "/missing.crt"
            let missing = try #require(throws: LoomError.self) { try configuration.makeConnectionConfiguration(environment: home) }
            #expect(missing.message.contains(folder.path + "/missing.crt"))
            #expect(missing.message.contains("does not exist"))
            configuration.sslRootCertificate = try folder.write("garbage.crt", "not a certificate\n")
            let garbage = try #require(throws: LoomError.self) { try configuration.makeConnectionConfiguration(environment: home) }
            #expect(garbage.message.contains("garbage.crt"))
            #expect(garbage.path == configuration.sslRootCertificate)
        }
        // The system's authorities vouch for names: a mode that does not check the name is refused.
        configuration.sslMode = .require
        configuration.sslRootCertificate = "system"
        let weak = try #require(throws: LoomError.self) { try configuration.makeConnectionConfiguration(environment: home) }
        #expect(weak.message.contains("verify-full"))
        // Without verification nothing is read: require and prefer connect with no file at all.
        configuration.sslRootCertificate = nil
        for mode in [PostgreSQLStore.Configuration.SSLMode.disable, .prefer, .require] {
            configuration.sslMode = mode
            let tls = try configuration.makeConnectionConfiguration(environment: home).configuration.tls
            #expect(tls.isAllowed == (mode != .disable))
            #expect(tls.isEnforced == (mode == .require))
        }
    }

    @Test("A Unix socket is never encrypted, whatever the mode (PostgreSQL has no TLS there, libpq ignores sslmode)")
    func unixSocketIgnoresSSLMode() throws {
        var configuration = try PostgreSQLStore.Configuration(url: "postgres://app@localhost/library?host=/run/postgresql&sslmode=verify-full", environment: [:])
        configuration.sslRootCertificate = "/nonexistent/ca.crt"
        #expect(try configuration.makeConnectionConfiguration(environment: [:]).configuration.tls.isAllowed == false)
    }

    // MARK: Passwords

    @Test("The password comes from the configuration, else PGPASSWORD, else the password file (PGPASSFILE, else ~/.pgpass)")
    func passwordSources() throws {
        let folder = try Folder()
        let homeFile = try folder.write(".pgpass", "*:*:*:*:from-home\n")
        let namedFile = try folder.write("named", "*:*:*:*:from-pgpassfile\n")
        var configuration = PostgreSQLStore.Configuration(endpoint: .tcp(host: "db", port: 5432), username: "app", database: "library")
        let home = ["HOME": folder.path]
        #expect(PostgreSQLPassword.resolve(configuration, environment: home).value == "from-home")
        #expect(PostgreSQLPassword.resolve(configuration, environment: home.merging(["PGPASSFILE": namedFile]) { $1 }).value == "from-pgpassfile")
        #expect(PostgreSQLPassword.resolve(configuration, environment: home.merging(["PGPASSWORD": "from-env", "PGPASSFILE": namedFile]) { $1 }).value == "from-env")
        // An empty PGPASSWORD is none: the file is read.
        #expect(PostgreSQLPassword.resolve(configuration, environment: home.merging(["PGPASSWORD": ""]) { $1 }).value == "from-home")
        configuration.passwordFile = namedFile
        #expect(PostgreSQLPassword.resolve(configuration, environment: home).value == "from-pgpassfile")
        configuration.password = "given"
        #expect(PostgreSQLPassword.resolve(configuration, environment: home.merging(["PGPASSWORD": "from-env"]) { $1 }).value == "given")
        // No file at all: no password, nothing to say.
        try FileManager.default.removeItem(atPath: homeFile)
        let nothing = PostgreSQLPassword.resolve(PostgreSQLStore.Configuration(endpoint: .tcp(host: "db", port: 5432), username: "app"), environment: home)
        #expect(nothing.value == nil)
        #expect(nothing.note == nil)
        // The resolved password reaches postgres-nio's configuration.
        var fromFile = PostgreSQLStore.Configuration(endpoint: .tcp(host: "db", port: 5432), username: "app", database: "library")
        fromFile.passwordFile = namedFile
        fromFile.sslMode = .disable
        #expect(try fromFile.makeConnectionConfiguration(environment: [:]).configuration.password == "from-pgpassfile")
    }

    @Test("Password file lines match host, port, database and user as libpq's: * wildcards, \\ escapes, comments, CRLF, first match wins")
    func passwordFileMatching() {
        let file = """
            # comment:with:five:fields:ignored
            short:line

            db.internal:5432:library:app:first\r
            db.internal:5432:library:app:second
            *:6543:*:app:any-host
            db.internal:*:other:*:any-port-and-user
            w\\:eird\\\\host:5432:library:app:escaped\\:pa\\\\ss
            \\*:5432:library:app:literal-star
            db.internal:5432:empty:app:
            """
        func password(_ host: String, _ port: String = "5432", _ database: String = "library", _ user: String = "app") -> String? {
            PostgreSQLPassword.password(in: file, hosts: [host], port: port, database: database, user: user)
        }
        #expect(password("db.internal") == "first")
        #expect(password("elsewhere", "6543", "whatever") == "any-host")
        #expect(password("db.internal", "1", "other", "bob") == "any-port-and-user")
        #expect(password("w:eird\\host") == "escaped:pa\\ss")
        #expect(password("*") == "literal-star")
        #expect(password("anything-else") == nil)          // `\*` is a literal star, not a wildcard
        #expect(password("db.internal", "5432", "empty") == nil)   // an empty password is none
        #expect(password("db.internal", "5432", "library", "bob") == nil)
        // A password may hold colons without escapes: the fifth field is the rest of the line.
        #expect(PostgreSQLPassword.password(in: "h:1:d:u:a:b:c", hosts: ["h"], port: "1", database: "d", user: "u") == "a:b:c")
    }

    @Test("A Unix socket matches its folder, and localhost when the folder is the default one; the port comes from the socket's name")
    func passwordFileSocketHosts() {
        let custom = PostgreSQLPassword.matchedHostsAndPort(.unixSocket(path: "/tmp/cluster/.s.PGSQL.6000"))
        #expect(custom.hosts == ["/tmp/cluster"])
        #expect(custom.port == "6000")
        let standard = PostgreSQLPassword.matchedHostsAndPort(.unixSocket(path: "/var/run/postgresql/.s.PGSQL.5432"))
        #expect(standard.hosts == ["/var/run/postgresql", "localhost"])
        #expect(standard.port == "5432")
        #expect(PostgreSQLPassword.matchedHostsAndPort(.tcp(host: "127.0.0.1", port: 7)) == (["127.0.0.1"], "7"))
    }

    @Test("A password file its group or others may read is ignored, as libpq does, and the note says so without the password")
    func passwordFilePermissions() throws {
        let folder = try Folder()
        var configuration = PostgreSQLStore.Configuration(endpoint: .tcp(host: "db", port: 5432), username: "app")
        for permissions in [0o640, 0o604, 0o660, 0o644, 0o700 | 0o001] {
            configuration.passwordFile = try folder.write("pgpass-\(permissions)", "*:*:*:*:hunter2\n", permissions: permissions)
            let resolved = PostgreSQLPassword.resolve(configuration, environment: [:])
            #expect(resolved.value == nil, "mode \(String(permissions, radix: 8))")
            #expect(resolved.note?.contains("chmod 0600") == true)
            #expect(resolved.note?.contains("hunter2") == false)
        }
        configuration.passwordFile = try folder.write("pgpass-owner", "*:*:*:*:hunter2\n", permissions: 0o400)
        #expect(PostgreSQLPassword.resolve(configuration, environment: [:]).value == "hunter2")
        // A folder is not a password file.
        configuration.passwordFile = folder.path
        let notAFile = PostgreSQLPassword.resolve(configuration, environment: [:])
        #expect(notAFile.value == nil)
        #expect(notAFile.note?.contains("not a plain file") == true)
    }

    // MARK: Passwords kept out of messages

    @Test("URL passwords are masked in any text: userinfo, a password parameter, several URLs, malformed ones")
    func redaction() {
        #expect(CredentialRedaction.redacting("postgres://app:hunter2@db:5432/library") == "postgres://app:***@db:5432/library")
        #expect(CredentialRedaction.redacting("at postgresql://app:hun@ter2@db/x?schema=a and postgres://b:pw@h") == "at postgresql://app:***@db/x?schema=a and postgres://b:***@h")
        #expect(CredentialRedaction.redacting("postgres://app@db/x?sslmode=require&password=hunter2&schema=s") == "postgres://app@db/x?sslmode=require&password=***&schema=s")
        #expect(CredentialRedaction.redacting("postgres://app:hunter2@db:notaport/library") == "postgres://app:***@db:notaport/library")
        #expect(CredentialRedaction.redacting("postgres://app@db:5432/library") == "postgres://app@db:5432/library")
        #expect(CredentialRedaction.redacting("postgres://app:@db/library") == "postgres://app:@db/library")
        #expect(CredentialRedaction.redacting("/var/lib/app/Library.loom") == "/var/lib/app/Library.loom")
        #expect(CredentialRedaction.redacting("a time 10:30 and a@b") == "a time 10:30 and a@b")
    }

    @Test("A URL that cannot be read is refused without its password")
    func malformedURLHidesPassword() {
        for text in ["postgres://app:hunter2@db:notaport/library", "mysql://app:hunter2@db/library", "mysql://app@db/library?password=hunter2&schema=x"] {
            let error = #expect(throws: LoomError.self) { try PostgreSQLStore.Configuration(url: text, environment: [:]) }
            #expect(error?.message.contains("hunter2") == false, "\(error?.message ?? "")")
            #expect(error?.message.contains("***") == true)
        }
    }

    @Test("A configuration printed, debug-printed or dumped names the server and schema, never the password")
    func descriptionHidesPassword() throws {
        let configuration = try PostgreSQLStore.Configuration(url: "postgres://app:hunter2@db:5432/library?schema=books", environment: [:])
        #expect(configuration.description == "db:5432/library, schema books")
        #expect("\(configuration)" == "db:5432/library, schema books")
        let debug = String(reflecting: configuration)
        #expect(debug.contains("db:5432") && debug.contains("app") && !debug.contains("hunter2"), "\(debug)")
        var dumped = ""
        dump(configuration, to: &dumped)
        #expect(dumped.contains("schemaName") && dumped.contains("***") && !dumped.contains("hunter2"), "\(dumped)")
    }
}
