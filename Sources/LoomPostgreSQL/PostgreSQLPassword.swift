import Foundation

/// Where a connection's password comes from when the configuration has none, as libpq does it:
/// `PGPASSWORD`, then the first matching line of the password file (libpq's `passfile`:
/// `PGPASSFILE`, else `~/.pgpass`). Read each time a connection opens, so that a changed file
/// takes effect without restarting the application.
enum PostgreSQLPassword {
    /// A password (or none), and why the password file was not read when it was skipped.
    struct Resolved {
        var value: String?
        /// Said in the error of a refused login: the file the user may think was used.
        var note: String?
    }

    /// The password for `configuration`'s connections, with `environment` for `PGPASSWORD`,
    /// `PGPASSFILE` and `HOME`.
    static func resolve(_ configuration: PostgreSQLStore.Configuration, environment: [String: String]) -> Resolved {
        if let password = configuration.password, !password.isEmpty { return Resolved(value: password) }
        if let password = environment["PGPASSWORD"], !password.isEmpty { return Resolved(value: password) }
        let path = configuration.passwordFile ?? environment["PGPASSFILE"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.pgpass")
        let file = FileManager.default
        guard let attributes = try? file.attributesOfItem(atPath: path) else { return Resolved() }
        guard attributes[.type] as? FileAttributeType == .typeRegular else {
            return Resolved(note: "the password file \(path) was not read: it is not a plain file")
        }
        // libpq's rule: a password file that its group or others can use is ignored.
        if let permissions = (attributes[.posixPermissions] as? NSNumber)?.intValue, permissions & 0o077 != 0 {
            return Resolved(note: "the password file \(path) was ignored: its group or others may read it (run chmod 0600 \(path), as libpq requires)")
        }
        guard let data = file.contents(atPath: path) else {
            return Resolved(note: "the password file \(path) could not be read")
        }
        let (hosts, port) = matchedHostsAndPort(configuration.endpoint)
        return Resolved(value: password(in: String(decoding: data, as: UTF8.self), hosts: hosts, port: port,
                                        database: configuration.database ?? configuration.username, user: configuration.username))
    }

    /// The host names a line's first field may match, and the port, as libpq matches them: the
    /// host as given for TCP; for a Unix socket its folder, and `localhost` when that folder is
    /// the default one.
    static func matchedHostsAndPort(_ endpoint: PostgreSQLStore.Configuration.Endpoint) -> (hosts: [String], port: String) {
        switch endpoint {
        case .tcp(let host, let port):
            return ([host], String(port))
        case .unixSocket(let path):
            let slash = path.lastIndex(of: "/") ?? path.startIndex
            let folder = String(path[..<slash])
            let name = path[path.index(after: slash)...]
            let port = name.hasPrefix(".s.PGSQL.") ? String(name.dropFirst(".s.PGSQL.".count)) : "5432"
            let isDefault = ["/var/run/postgresql", "/run/postgresql", "/tmp"].contains(folder)
            return (isDefault ? [folder, "localhost"] : [folder], port)
        }
    }

    /// The password of the first line of a password file that matches, or `nil`. A line is
    /// `host:port:database:user:password`; a field that is `*` alone matches anything; `\` makes
    /// the next character (`:` or `\`) literal; lines starting with `#`, and lines with fewer
    /// than five fields, are skipped. An empty password is no password.
    static func password(in text: String, hosts: [String], port: String, database: String, user: String) -> String? {
        // "\r\n" is one Character in Swift: split on it too, or a CRLF file is one line.
        for rawLine in text.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            var line = Substring(rawLine)
            while line.last == "\r" { line = line.dropLast() }
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let fields = Self.fields(of: line) else { continue }
            func matches(_ index: Int, _ wanted: [String]) -> Bool {
                fields[index].isWildcard || wanted.contains(fields[index].value)
            }
            if matches(0, hosts), matches(1, [port]), matches(2, [database]), matches(3, [user]) {
                return fields[4].value.isEmpty ? nil : fields[4].value
            }
        }
        return nil
    }

    /// The five fields of a line (the fifth is the rest of the line), unescaped, or `nil`
    /// when it has fewer.
    private static func fields(of line: Substring) -> [(value: String, isWildcard: Bool)]? {
        var fields: [(value: String, isWildcard: Bool)] = []
        var value = ""
        var raw = ""
        var escaped = false
        for character in line {
            if escaped {
                value.append(character)
                raw.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
                raw.append(character)
            } else if character == ":", fields.count < 4 {
                fields.append((value, raw == "*"))
                value = ""
                raw = ""
            } else {
                value.append(character)
                raw.append(character)
            }
        }
        guard fields.count == 4 else { return nil }
        fields.append((value, false))
        return fields
    }
}
