import Foundation
import Logging
import Loom
@_spi(LoomStore) import LoomCore
@testable import LoomPostgreSQL
import NIOPosix
import PostgresNIO
import Testing

/// Encrypted and password-checked connections against a real server: a cluster of the suite's
/// own (``SecureCluster``) with a self-signed certificate authority, a server certificate made
/// out to `localhost` only, TLS on TCP at 127.0.0.1, and two roles that must give a password
/// (one checked by SCRAM-SHA-256, one by MD5). The settings without a server:
/// ``PostgreSQLConnectionSettingsTests``.
///
/// Serialized (one test turns the server's TLS off for a while), on threads of its own (the
/// cluster's start and the `loom` tool are waited for synchronously).
@Suite("PostgreSQL secure connections", .serialized, PostgresServer.required, .ownThreads, SecureCluster.trait, .timeLimit(.minutes(5)))
struct PostgreSQLSecureConnectionTests {
    static let password = "Pa55-w0rd_that:never+shows"

    var cluster: SecureCluster { get throws { try #require(SecureCluster.current) } }

    /// A URL on the cluster: TCP to `host` unless `socket`, with `query` appended.
    func url(user: String = "postgres", password: String? = nil, host: String = "localhost", socket: Bool = false, _ query: String = "") throws -> String {
        let cluster = try cluster
        let userinfo = user + (password.map { ":" + ($0.addingPercentEncoding(withAllowedCharacters: .urlUserAllowed) ?? $0) } ?? "")
        let schema = "schema=tls_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12)
        let socketHost = socket ? "&host=\(cluster.owned.folder)" : ""
        return "postgres://\(userinfo)@\(host):\(cluster.port)/postgres?\(schema)\(socketHost)\(query.isEmpty ? "" : "&" + query)"
    }

    /// Opens a store at `configuration`, saves a book and reads it back, and returns whether the
    /// store's own connection is encrypted (`pg_stat_ssl`, seen from a connection of its own
    /// with the same settings).
    @discardableResult
    func roundTrip(_ configuration: PostgreSQLStore.Configuration) async throws -> Bool {
        let container = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: try Schema(Book.self)))
        try await container.save { context in context.insert(Book(isbn: "1", title: "Encrypted")) }
        let titles = try await container.performBackgroundTask { context in try context.fetch(FetchRequest<Book>()).map(\.title) }
        #expect(titles == ["Encrypted"])
        try await container.close()
        let logger = Logger(label: "test")
        let connection = try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: try configuration.connectionConfiguration, id: 1, logger: logger)
        let encrypted: Bool
        do {
            let rows = try await connection.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", logger: logger).collect()
            encrypted = try rows.first?.decode(Bool.self) ?? false
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
        return encrypted
    }

    /// The error opening a store at `url` throws.
    func openingError(_ url: String) throws -> LoomError {
        let configuration = try PostgreSQLStore.Configuration(url: url)
        return try #require(throws: LoomError.self) { try PostgreSQLStore(configuration: configuration, schema: try Schema(Book.self)) }
    }

    // MARK: TLS

    @Test("sslmode=require encrypts without checking the certificate (127.0.0.1 is not its name)")
    func requireEncrypts() async throws {
        #expect(try await roundTrip(try PostgreSQLStore.Configuration(url: try url(host: "127.0.0.1", "sslmode=require"))))
    }

    @Test("verify-full with the authority that signed the certificate and the host it names connects, encrypted; so do verify-ca and prefer")
    func verifyFullWithRightAuthorityAndHost() async throws {
        let ca = try cluster.file("ca.crt")
        #expect(try await roundTrip(try PostgreSQLStore.Configuration(url: try url("sslmode=verify-full&sslrootcert=\(ca)"))))
        #expect(try await roundTrip(try PostgreSQLStore.Configuration(url: try url("sslmode=verify-ca&sslrootcert=\(ca)"))))
        #expect(try await roundTrip(try PostgreSQLStore.Configuration(url: try url("sslmode=prefer"))))
        #expect(try await roundTrip(try PostgreSQLStore.Configuration(url: try url("sslmode=disable"))) == false)
        // The same in code rather than in a URL.
        var configuration = PostgreSQLStore.Configuration(endpoint: .tcp(host: "localhost", port: try cluster.port), username: "postgres", database: "postgres",
                                                          schemaName: "tls_in_code")
        configuration.sslMode = .verifyFull
        configuration.sslRootCertificate = ca
        #expect(try await roundTrip(configuration))
    }

    @Test("A certificate signed by another authority is refused under verify-full, verify-ca, and require given that authority")
    func wrongAuthorityRefused() throws {
        let other = try cluster.file("other-ca.crt")
        for mode in ["verify-full", "verify-ca", "require"] {
            let error = try openingError(try url("sslmode=\(mode)&sslrootcert=\(other)"))
            #expect(error.code == .storeFailure)
            #expect(error.message.contains("not signed by a certificate authority of \(other)"), "\(error.message)")
            #expect(error.message.contains("sslmode \(mode)"))
        }
    }

    @Test("A host the certificate does not name is refused under verify-full, accepted under verify-ca")
    func wrongHostName() async throws {
        let ca = try cluster.file("ca.crt")
        let error = try openingError(try url(host: "127.0.0.1", "sslmode=verify-full&sslrootcert=\(ca)"))
        #expect(error.code == .storeFailure)
        #expect(error.message.contains("not made out to 127.0.0.1"), "\(error.message)")
        #expect(error.message.contains("verify-ca"))
        #expect(try await roundTrip(try PostgreSQLStore.Configuration(url: try url(host: "127.0.0.1", "sslmode=verify-ca&sslrootcert=\(ca)"))))
    }

    @Test("Against a server without TLS, require fails saying so; prefer and disable connect in clear")
    func serverWithoutTLS() async throws {
        let cluster = try cluster
        try cluster.setTLS(false)
        do {
            let error = try openingError(try url(host: "127.0.0.1", "sslmode=require"))
            #expect(error.code == .storeFailure)
            #expect(error.message.contains("does not accept encrypted connections"), "\(error.message)")
            #expect(try await roundTrip(try PostgreSQLStore.Configuration(url: try url("sslmode=prefer"))) == false)
            #expect(try await roundTrip(try PostgreSQLStore.Configuration(url: try url())) == false)
        } catch {
            try cluster.setTLS(true)
            throw error
        }
        try cluster.setTLS(true)
    }

    @Test("Over the Unix socket the mode is ignored, as libpq does: verify-full connects, in clear")
    func unixSocketIgnoresMode() async throws {
        let ca = try cluster.file("ca.crt")
        #expect(try await roundTrip(try PostgreSQLStore.Configuration(url: try url(socket: true, "sslmode=verify-full&sslrootcert=\(ca)"))) == false)
    }

    // MARK: Passwords

    @Test("Roles checked by SCRAM-SHA-256 and by MD5 log in with the password in the URL, over TLS and over the socket", arguments: ["loom_scram", "loom_md5"])
    func passwordInURL(role: String) async throws {
        let ca = try cluster.file("ca.crt")
        #expect(try await roundTrip(try PostgreSQLStore.Configuration(url: try url(user: role, password: Self.password, "sslmode=verify-full&sslrootcert=\(ca)"))))
        try await roundTrip(try PostgreSQLStore.Configuration(url: try url(user: role, password: Self.password, socket: true)))
    }

    @Test("Without a password in the URL the password file is read; a group-readable one is ignored, and the refusal says so", arguments: ["loom_scram", "loom_md5"])
    func passwordFile(role: String) async throws {
        let folder = try PostgreSQLConnectionSettingsTests.Folder()
        let escaped = Self.password.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: ":", with: "\\:")
        let port = try cluster.port
        let lines = "# for the tests\nlocalhost:\(port):postgres:someone_else:wrong\nlocalhost:\(port):*:\(role):\(escaped)\n"
        var configuration = try PostgreSQLStore.Configuration(url: try url(user: role, "sslmode=require"))
        configuration.passwordFile = try folder.write("pgpass", lines)
        #expect(try await roundTrip(configuration))
        configuration.passwordFile = try folder.write("pgpass-shared", lines, permissions: 0o644)
        let error = try #require(throws: LoomError.self) { try PostgreSQLStore(configuration: configuration, schema: try Schema(Book.self)) }
        #expect(error.code == .storeFailure)
        #expect(error.message.contains("asks user \(role) for a password"), "\(error.message)")
        #expect(error.message.contains("chmod 0600"))
        #expect(!error.message.contains(Self.password) && !"\(error)".contains(Self.password))
    }

    @Test("A wrong password is refused by the server; no message shows it, nor the right one from the file", arguments: ["loom_scram", "loom_md5"])
    func wrongPassword(role: String) throws {
        let wrong = "Wr0ng-secret-\(role)"
        let error = try openingError(try url(user: role, password: wrong, "sslmode=require"))
        #expect(error.code == .storeFailure)
        #expect(error.message.contains("password authentication failed"), "\(error.message)")
        for text in [error.message, "\(error)", String(reflecting: error)] {
            #expect(!text.contains(wrong), "\(text)")
        }
        let none = try openingError(try url(user: role, "sslmode=require&passfile=/nonexistent/pgpass"))
        #expect(none.message.contains("none was given"), "\(none.message)")
    }

    // MARK: The loom tool

    /// Runs `loom arguments…` with `environment` and returns everything it printed.
    func loom(_ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32, output: String) {
        try LoomExecutable.requirePostgreSQLTrait()
        let run = try await LoomExecutable.run(arguments, environment: environment)
        return (run.status, run.standardOutput + run.standardError)
    }

    @Test("The loom tool reads PGPASSWORD and the password file; nothing it prints shows the password, at any LOOM_SQL_DEBUG level, in success or failure")
    func toolNeverShowsPassword() async throws {
        let ca = try cluster.file("ca.crt")
        let withPassword = try url(user: "loom_scram", password: Self.password, "sslmode=verify-full&sslrootcert=\(ca)")
        let configuration = try PostgreSQLStore.Configuration(url: withPassword)
        try await roundTrip(configuration)
        let withoutPassword = try url(user: "loom_scram", "sslmode=verify-full&sslrootcert=\(ca)").replacingOccurrences(
            of: #"schema=[a-z0-9_]+"#, with: "schema=\(configuration.schemaName)", options: .regularExpression)
        let folder = try PostgreSQLConnectionSettingsTests.Folder()
        let passwordFile = try folder.write("pgpass", "*:*:*:loom_scram:\(Self.password.replacingOccurrences(of: ":", with: "\\:"))\n")
        for level in ["0", "1", "2", "3"] {
            let debug = ["LOOM_SQL_DEBUG": level, "LOOM_SQL_DEBUG_VALUES": "1"]
            // Every verb at level 3 (the most it logs); inspect at the others.
            let verbs: [[String]] = level == "3" ? [["inspect"], ["history"], ["verify"], ["dump"], ["query", "Book"]] : [["inspect"]]
            // The password in the URL, then in PGPASSWORD, then in a password file.
            for (location, environment) in [(withPassword, [:]), (withoutPassword, ["PGPASSWORD": Self.password]),
                                            (withoutPassword, ["PGPASSFILE": passwordFile, "PGPASSWORD": ""])] {
                for verb in verbs {
                    let run = try await loom(verb == ["query", "Book"] ? ["query", location, "Book"] : verb + [location], environment: debug.merging(environment) { $1 })
                    #expect(run.status == 0, "\(verb) at level \(level): \(run.output)")
                    #expect(!run.output.contains(Self.password), "\(verb) at level \(level) printed the password: \(run.output)")
                }
            }
            // Failures: a wrong password, an unreachable server, a URL that cannot be read.
            let wrong = withPassword.replacingOccurrences(of: "Pa55", with: "Xa55")
            let unreachable = try url(user: "loom_scram", password: Self.password, host: "127.0.0.1", "sslmode=disable")
                .replacingOccurrences(of: ":\(try cluster.port)/", with: ":1/")
            let malformed = "postgres://loom_scram:\(Self.password.addingPercentEncoding(withAllowedCharacters: .urlUserAllowed)!)@localhost:port/postgres"
            for location in [wrong, unreachable, malformed] {
                for verb in verbs {
                    let run = try await loom(verb == ["query", "Book"] ? ["query", location, "Book"] : verb + [location], environment: debug)
                    #expect(run.status != 0, "\(verb) \(location)")
                    #expect(run.output.contains("Error"), "\(run.output)")
                    for secret in [Self.password, Self.password.replacingOccurrences(of: "Pa55", with: "Xa55"),
                                   Self.password.addingPercentEncoding(withAllowedCharacters: .urlUserAllowed)!] {
                        #expect(!run.output.contains(secret), "\(verb) at level \(level) printed the password: \(run.output)")
                    }
                }
            }
        }
    }

    @Test("SQL logging at level 3 with values shows no password: the store's statements carry none and its messages name no URL")
    func logLinesShowNoPassword() async throws {
        let ca = try cluster.file("ca.crt")
        let lines = LogLines()
        var configuration = try PostgreSQLStore.Configuration(url: try url(user: "loom_md5", password: Self.password, "sslmode=verify-full&sslrootcert=\(ca)"))
        // This store's own log (what LOOM_SQL_DEBUG=3 and LOOM_SQL_DEBUG_VALUES=1 give), not the
        // process-wide settings other suites change meanwhile.
        configuration.sqlLog = .some(SQLStatementLog(logger: Logger(label: "secure-test") { _ in lines }, level: 3, logsValues: true, slowThreshold: .zero))
        try await roundTrip(configuration)
        let logged = lines.all.joined(separator: "\n")
        #expect(logged.contains("INSERT"), "SQL logging logged nothing: \(logged.prefix(200))")
        #expect(logged.contains("QUERY PLAN") || logged.contains("Scan") || logged.contains("Result"), "no plan at level 3: \(logged.prefix(400))")
        #expect(!logged.contains(Self.password))
    }
}

/// Log lines kept by a test's own log handler.
///
/// `@unchecked Sendable`: `lines` is only touched with `lock` held.
final class LogLines: LogHandler, @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    var all: [String] { lock.withLock { lines } }

    func log(event: LogEvent) {
        lock.withLock { lines.append("\(event.message) \(event.metadata ?? [:])") }
    }
}

/// The suite's cluster (``OwnedPostgresCluster``, TLS and password roles on), started once
/// around the suite and stopped after it.
///
/// `@unchecked Sendable`: fixed at init.
final class SecureCluster: @unchecked Sendable {
    @TaskLocal static var current: SecureCluster?

    let owned: OwnedPostgresCluster
    let port: Int

    init() throws {
        owned = try OwnedPostgresCluster(options: ["LOOM_POSTGRES_TLS": "1", "LOOM_POSTGRES_PASSWORD": PostgreSQLSecureConnectionTests.password])
        port = try #require(URLComponents(string: owned.url)?.port)
    }

    /// A file the cluster script made in its `tls` folder.
    func file(_ name: String) -> String { owned.folder + "/tls/" + name }

    /// Turns the server's TLS on or off (`ALTER SYSTEM`, reload), and waits until new sessions
    /// see it.
    func setTLS(_ on: Bool) throws {
        try owned.sql("ALTER SYSTEM SET ssl = \(on ? "on" : "off")")
        try owned.sql("SELECT pg_reload_conf()")
        let deadline = ContinuousClock.now + .seconds(10)
        while try owned.sql("SHOW ssl") != [on ? "on" : "off"], ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// Starts the cluster around the suite (when PostgreSQL tests run), on threads of its own.
    struct Trait: SuiteTrait, TestScoping {
        var isRecursive: Bool { false }

        func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
            guard PostgresServer.isEnabled else { return try await function() }
            let cluster = try await withTaskExecutorPreference(OwnThreadsExecutor.shared) { try SecureCluster() }
            try await SecureCluster.$current.withValue(cluster) { try await function() }
        }
    }

    static var trait: Trait { Trait() }
}
