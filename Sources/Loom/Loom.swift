@_exported public import LoomCore
@_exported public import LoomSQLite
