import Foundation
@_spi(LoomStore) import LoomCore
// NIOSSL's types (TLS configuration, certificates, its errors) come with PostgresNIO, which
// re-exports the module it builds its TLS on.
import PostgresNIO

extension PostgreSQLStore.Configuration {
    /// Whether a connection is encrypted and what of the server's certificate is checked: libpq's
    /// `sslmode`, with its names (`?sslmode=verify-full` in a URL).
    ///
    /// libpq's `allow` (plain first, TLS only if the server insists) is not offered: ``prefer``
    /// protects as much and costs one round trip when the server has no TLS.
    ///
    /// Over a Unix socket no mode encrypts: PostgreSQL has no TLS there, and libpq ignores the
    /// mode too.
    public enum SSLMode: String, Sendable, CaseIterable {
        /// No TLS.
        case disable
        /// TLS when the server offers it, without checking its certificate; plain when it has
        /// none. libpq's default, and Loom's: it stops a passive eavesdropper, not an impostor.
        case prefer
        /// TLS or no connection, without checking the certificate (unless a CA file is given or
        /// found, ``sslRootCertificate``: then as ``verifyCA``, libpq's rule).
        case require
        /// TLS, and the certificate must be signed by an authority of ``sslRootCertificate``;
        /// its host name is not checked.
        case verifyCA = "verify-ca"
        /// TLS, the certificate signed by an authority of ``sslRootCertificate``, and made out
        /// to the host connected to (a name, or an IP address in the certificate's alternative
        /// names). The mode to use on a network you do not own.
        case verifyFull = "verify-full"

        /// The mode named `text` (libpq's spelling), said to come from `source` in an error.
        init(parsing text: String, in source: String) throws(LoomError) {
            if let mode = SSLMode(rawValue: text) {
                self = mode
            } else if text == "allow" {
                throw LoomError(.invalidRequest, "sslmode \"allow\" (in \(source)) is not supported: use prefer (TLS when the server offers it), require, verify-ca, verify-full or disable.")
            } else {
                throw LoomError(.invalidRequest, "\"\(text)\" (in \(source)) is not an sslmode: write disable, prefer, require, verify-ca or verify-full.")
            }
        }
    }
}

/// How the store's TCP connections use TLS: the postgres-nio mode for a configuration's
/// ``PostgreSQLStore/Configuration/sslMode``, and the errors of a refused handshake told in
/// words.
enum PostgreSQLTLS {
    /// The postgres-nio TLS mode of `configuration` over TCP.
    static func mode(for configuration: PostgreSQLStore.Configuration, environment: [String: String]) throws(LoomError) -> PostgresConnection.Configuration.TLS {
        let mode = configuration.sslMode
        if mode == .disable { return .disable }
        var tls = TLSConfiguration.makeClientConfiguration()
        switch try rootCertificates(configuration, environment: environment) {
        case nil:
            tls.certificateVerification = .none
        case .system?:
            guard mode == .verifyFull else {
                throw LoomError(.invalidRequest, "sslrootcert \"system\" needs sslmode verify-full (the system's authorities vouch for names, so the name must be checked), not \(mode.rawValue).")
            }
            tls.trustRoots = .default
            tls.certificateVerification = .fullVerification
        case .file(_, let certificates)?:
            tls.trustRoots = .certificates(certificates)
            tls.certificateVerification = mode == .verifyFull ? .fullVerification : .noHostnameVerification
        }
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: tls)
        } catch {
            throw LoomError(.invalidRequest, "The TLS settings for \(configuration.description) could not be used: \(error).", underlying: error)
        }
        return mode == .prefer ? .prefer(context) : .require(context)
    }

    /// The authorities the server's certificate is checked against.
    enum Roots {
        case system
        case file(path: String, certificates: [NIOSSLCertificate])
    }

    /// The authorities of `configuration` (`nil`: nothing is checked), read from its
    /// `sslrootcert` file, or from `~/.postgresql/root.crt` when it exists (libpq's default).
    static func rootCertificates(_ configuration: PostgreSQLStore.Configuration, environment: [String: String]) throws(LoomError) -> Roots? {
        let mode = configuration.sslMode
        if configuration.sslRootCertificate == "system" { return .system }
        let path: String
        if let given = configuration.sslRootCertificate, !given.isEmpty {
            path = given
        } else {
            let home = environment["HOME"] ?? NSHomeDirectory()
            let found = home + "/.postgresql/root.crt"
            // libpq checks a prefer connection's certificate never, a require connection's only
            // when an authorities' file is there.
            guard mode != .prefer, FileManager.default.fileExists(atPath: found) else {
                if mode == .verifyCA || mode == .verifyFull {
                    throw LoomError(.invalidRequest, "sslmode \(mode.rawValue) checks the server's certificate, and no certificate authority was given: name the PEM file of the authority that signed it with sslrootcert (sslRootCertificate), or \"system\" for the system's authorities (\(found) does not exist either). sslmode require encrypts without checking.")
                }
                return nil
            }
            path = found
        }
        if mode == .prefer { return nil }
        guard FileManager.default.fileExists(atPath: path) else {
            throw LoomError(.invalidRequest, "The certificate authorities' file \(path) (sslrootcert) does not exist: give the PEM file of the authority that signed the server's certificate.", path: path)
        }
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(path)
        } catch {
            throw LoomError(.invalidRequest, "The certificate authorities' file \(path) (sslrootcert) could not be read as PEM certificates: \(error).", path: path, underlying: error)
        }
        guard !certificates.isEmpty else {
            throw LoomError(.invalidRequest, "The certificate authorities' file \(path) (sslrootcert) holds no PEM certificate.", path: path)
        }
        return .file(path: path, certificates: certificates)
    }

    /// `error`, thrown while connecting, told in words when TLS or the password refused the
    /// connection; `nil` for any other failure (the server is down, the network is gone).
    static func explain(_ error: any Error, configuration: PostgreSQLStore.Configuration, passwordNote: String?) -> LoomError? {
        let place = configuration.endpointDescription
        let mode = configuration.sslMode.rawValue
        let causes = chain(of: error)
        let psql = causes.lazy.compactMap { $0 as? PSQLError }.first
        func refused(_ why: String) -> LoomError {
            LoomError(.storeFailure, "Could not connect to the PostgreSQL server at \(place) (sslmode \(mode)): \(why)",
                      underlying: error, storeCode: PostgreSQLStore.storeCode(of: error))
        }
        if psql?.code == .sslUnsupported {
            return refused("the server does not accept encrypted connections. Turn ssl on in its postgresql.conf, or connect with sslmode prefer (encrypted when the server can) or disable.")
        }
        if causes.contains(where: { ($0 as? NIOSSLExtraError) == .failedToValidateHostname }) {
            return refused("the server's certificate is not made out to \(configuration.host ?? place). Connect by a name the certificate holds, have a certificate made out to this name, or use sslmode verify-ca to check only who signed it.")
        }
        for cause in causes {
            guard let ssl = cause as? NIOSSLError else { continue }
            let roots = configuration.sslRootCertificate ?? "~/.postgresql/root.crt"
            if case .handshakeFailed(let reason) = ssl, "\(reason)".contains("CERTIFICATE_VERIFY_FAILED") {
                return refused("the server's certificate was not signed by a certificate authority of \(roots) (sslrootcert). Give the file of the authority that signed it (\(reason)).")
            }
            return refused("the TLS handshake failed: \(ssl).")
        }
        if psql?.code == .authMechanismRequiresPassword {
            return refused("the server asks user \(configuration.username) for a password, and none was given. Set PGPASSWORD, add a line for this server to the password file (~/.pgpass, or PGPASSFILE), or put it in the configuration\(passwordNote.map { "; \($0)" } ?? "").")
        }
        if let passwordNote, let psql, psql.code == .server, psql.serverInfo?[.sqlState] == "28P01" {
            return refused("\(psql.serverInfo?[.message] ?? "the password was refused"); \(passwordNote).")
        }
        return nil
    }

    /// `error` and the errors under it (postgres-nio's `underlying`).
    private static func chain(of error: any Error) -> [any Error] {
        var errors: [any Error] = [error]
        while let psql = errors.last as? PSQLError, let next = psql.underlying, errors.count < 8 {
            errors.append(next)
        }
        return errors
    }
}

extension PostgreSQLStore.Configuration {
    /// The host connected to over TCP; `nil` for a Unix socket.
    var host: String? {
        if case .tcp(let host, _) = endpoint { host } else { nil }
    }

    /// Where the server is, for messages: `host:port` or the socket's path.
    var endpointDescription: String {
        switch endpoint {
        case .tcp(let host, let port): "\(host):\(port)"
        case .unixSocket(let path): path
        }
    }
}

/// A configuration shows where the store is, never its password: printed (`host:port/database,
/// schema name`), debug-printed, or dumped (the password as `***`).
extension PostgreSQLStore.Configuration: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var debugDescription: String {
        "PostgreSQLStore.Configuration(\(description), user \(username), sslmode \(sslMode.rawValue)\(password == nil ? "" : ", password ***"))"
    }

    public var customMirror: Mirror {
        Mirror(self, children: [
            "endpoint": endpoint, "username": username, "password": password.map { _ in CredentialRedaction.mask } as Any,
            "database": database as Any, "schemaName": schemaName, "sslMode": sslMode, "sslRootCertificate": sslRootCertificate as Any,
            "passwordFile": passwordFile as Any, "maximumReaderCount": maximumReaderCount, "responseTimeout": responseTimeout,
            "recordsHistory": recordsHistory,
        ], displayStyle: .struct)
    }
}
