import Loom
import GRDB
import GRDBSQLite
import CBenchSupport

@Model final class Probe {
    var name: String
    init(name: String) { self.name = name }
}
print(String(cString: sqlite3_libversion()), loom_bench_heap_in_use())
