import Foundation

/// The SVG chart of a run (`--svg PATH`, `--svg-from JSON`): per workload, Loom's ratio to each
/// other contender on a log scale, with the target marked.
///
/// A row is a metric: every metric with a target, or, in a workload with none, its first metric
/// that has ratios. Each contender is a dot at Loom's cost ÷ its cost: Loom's time ÷ the
/// contender's (bytes for memory rows), the inverse for throughput, so that left of 1 always
/// means Loom does better. A ratio target is a black bar on its row; a time target (a median
/// or a worst round) is not a ratio and is named in the row's label only.
///
/// It reads the `--json` file's shape through ``ChartInput`` (the fields it needs), so the
/// JSON of older runs renders too. No dependency: the SVG is written as text.
enum Chart {
    /// The chart of `input` as an SVG document.
    static func svg(_ input: ChartInput, title: String? = nil) -> String {
        let rows = rows(of: input)
        let contenders = Contender.allCases.filter { contender in
            contender != .loom && rows.contains { $0.points.contains { $0.contender == contender } }
        }
        let values: [Double] = rows.flatMap { row -> [Double] in row.points.map(\.ratio) + [row.target?.limit].compactMap { $0 } } + [1]
        let scale = LogScale(values: values, left: Layout.plotLeft, right: Layout.plotRight)
        let height = Layout.top + Double(max(rows.count, 1)) * Layout.rowHeight + Layout.bottom

        var out = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(Layout.width))" height="\(Int(height))" \
            viewBox="0 0 \(Int(Layout.width)) \(Int(height))" font-family="Helvetica, Arial, sans-serif" font-size="11">

            """
        out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        out += text(12, 20, title ?? "Loom ÷ each contender, per workload (log scale; left of 1: Loom is faster or smaller)", size: 13, weight: "bold")
        if let caption = input.caption { out += text(12, 36, caption, fill: "#555") }

        // Legend.
        var x = 12.0
        for contender in contenders {
            out += marker(contender, x: x + 5, y: 54)
            out += text(x + 14, 58, contender.label)
            x += 24 + Double(contender.label.count) * 6.5
        }
        out += "<rect x=\"\(f(x + 4))\" y=\"48\" width=\"3\" height=\"12\" fill=\"black\"/>\n"
        out += text(x + 12, 58, "target")

        // Loom's side, the grid and the axis.
        let plotTop = Layout.top - 6
        let plotBottom = height - Layout.bottom + 4
        let one = scale.x(1)
        out += "<rect x=\"\(f(Layout.plotLeft))\" y=\"\(f(plotTop))\" width=\"\(f(one - Layout.plotLeft))\" height=\"\(f(plotBottom - plotTop))\" fill=\"#eef6ee\"/>\n"
        for tick in scale.ticks {
            let tx = scale.x(tick)
            out += "<line x1=\"\(f(tx))\" y1=\"\(f(plotTop))\" x2=\"\(f(tx))\" y2=\"\(f(plotBottom))\" stroke=\"\(tick == 1 ? "#333" : "#ddd")\" stroke-width=\"\(tick == 1 ? 1.5 : 1)\"/>\n"
            out += text(tx, plotBottom + 14, tickLabel(tick), anchor: "middle")
        }
        out += text(scale.x(1) - 6, plotBottom + 28, "← Loom better", anchor: "end", fill: "#2a7a2a")
        out += text(scale.x(1) + 6, plotBottom + 28, "Loom worse →", fill: "#a33")

        // Rows.
        var previousWorkload = ""
        for (index, row) in rows.enumerated() {
            let y = Layout.top + Double(index) * Layout.rowHeight + Layout.rowHeight / 2
            if row.workload != previousWorkload, index > 0 {
                let lineY = y - Layout.rowHeight / 2
                out += "<line x1=\"8\" y1=\"\(f(lineY))\" x2=\"\(f(Layout.width - 8))\" y2=\"\(f(lineY))\" stroke=\"#bbb\"/>\n"
            }
            out += text(12, y + 4, row.workload == previousWorkload ? "" : row.workload, weight: "bold")
            out += text(60, y + 4, row.label)
            previousWorkload = row.workload
            if let target = row.target {
                let tx = scale.x(target.limit)
                out += "<rect x=\"\(f(tx - 1.5))\" y=\"\(f(y - 8))\" width=\"3\" height=\"16\" fill=\"black\"><title>\(escape(target.description))</title></rect>\n"
            }
            for point in row.points {
                out += marker(point.contender, x: scale.x(point.ratio), y: y,
                              title: "\(row.workload) \(row.label): Loom ÷ \(point.label) = \(Format.ratio(point.ratio))")
            }
        }
        out += "</svg>\n"
        return out
    }

    /// Reads a `--json` file and writes its chart to `svgPath`.
    static func write(fromJSON jsonPath: String, to svgPath: String) throws {
        let data: Data
        do { data = try Data(contentsOf: URL(filePath: jsonPath)) } catch {
            throw BenchError("cannot read \(jsonPath): \(error.localizedDescription)")
        }
        let input: ChartInput
        do { input = try ChartInput.decode(data) } catch {
            throw BenchError("\(jsonPath) is not a loom-bench --json file: \(error)")
        }
        try write(input, to: svgPath)
    }

    static func write(_ input: ChartInput, to svgPath: String) throws {
        do { try Data(svg(input).utf8).write(to: URL(filePath: svgPath), options: .atomic) } catch {
            throw BenchError("cannot write \(svgPath): \(error.localizedDescription)")
        }
    }

    // MARK: Rows

    struct Point: Equatable {
        var contender: Contender
        var label: String
        /// Loom's cost ÷ the contender's (< 1: Loom does better).
        var ratio: Double
    }

    struct TargetMark: Equatable {
        /// Where the bar goes, on the same scale as the points.
        var limit: Double
        var description: String
    }

    struct Row: Equatable {
        var workload: String
        var label: String
        var points: [Point]
        var target: TargetMark?
    }

    /// The rows of `input`, in report order.
    static func rows(of input: ChartInput) -> [Row] {
        var rows: [Row] = []
        for workload in input.workloads where workload.available {
            let charted = workload.metrics.filter { $0.unit != "count" && !$0.loomRatios.isEmpty }
            let withTarget = charted.filter { $0.target != nil }
            for metric in withTarget.isEmpty ? Array(charted.prefix(1)) : withTarget {
                let inverted = metric.unit == Metric.Unit.operationsPerSecond.rawValue
                let points = Contender.allCases.compactMap { contender -> Point? in
                    guard let ratio = metric.loomRatios[contender.rawValue], ratio.isFinite, ratio > 0 else { return nil }
                    let label = workload.labels?[contender.rawValue] ?? contender.label
                    return Point(contender: contender, label: label, ratio: inverted ? 1 / ratio : ratio)
                }
                guard !points.isEmpty else { continue }
                var label = metric.label
                var mark: TargetMark?
                if let target = metric.target {
                    if let limit = target.ratioLimit, limit > 0 {
                        mark = TargetMark(limit: inverted ? 1 / limit : limit, description: "target \(target.target)")
                    } else {
                        label += " (target \(target.target))"
                    }
                }
                rows.append(Row(workload: workload.id, label: label, points: points, target: mark))
            }
        }
        return rows
    }

    // MARK: Drawing

    enum Layout {
        static let width = 980.0
        static let plotLeft = 400.0
        static let plotRight = 960.0
        static let top = 78.0
        static let rowHeight = 20.0
        static let bottom = 44.0
    }

    /// A log₁₀ axis over the values, widened to whole 1-2-5 ticks.
    struct LogScale {
        var low: Double
        var high: Double
        var left: Double
        var right: Double

        init(values: [Double], left: Double, right: Double) {
            let positive = values.filter { $0.isFinite && $0 > 0 }
            let steps = [1.0, 2, 5]
            func floorTick(_ v: Double) -> Double {
                let decade = pow(10, floor(log10(v)))
                return steps.reversed().map { $0 * decade }.first { $0 <= v * (1 + 1e-9) } ?? decade
            }
            func ceilTick(_ v: Double) -> Double {
                let decade = pow(10, floor(log10(v)))
                return (steps + [10]).map { $0 * decade }.first { $0 >= v * (1 - 1e-9) } ?? 10 * decade
            }
            low = floorTick(min(positive.min() ?? 1, 1) / 1.15)
            high = ceilTick(max(positive.max() ?? 1, 1) * 1.15)
            self.left = left
            self.right = right
        }

        func x(_ value: Double) -> Double {
            let v = min(max(value, low), high)
            return left + (log10(v) - log10(low)) / (log10(high) - log10(low)) * (right - left)
        }

        /// 1-2-5 ticks from `low` to `high`.
        var ticks: [Double] {
            var result: [Double] = []
            var decade = pow(10, floor(log10(low)))
            while decade <= high * (1 + 1e-9) {
                for step in [1.0, 2, 5] {
                    let tick = step * decade
                    if tick >= low * (1 - 1e-9), tick <= high * (1 + 1e-9) { result.append(tick) }
                }
                decade *= 10
            }
            return result
        }
    }

    static func tickLabel(_ value: Double) -> String {
        value >= 1 ? String(format: "%g×", value) : String(format: "%g×", (value * 1000).rounded() / 1000)
    }

    static func marker(_ contender: Contender, x: Double, y: Double, title: String? = nil) -> String {
        let tip = title.map { "<title>\(escape($0))</title>" } ?? ""
        let (color, shape): (String, String) = switch contender {
        case .raw: ("#555555", "circle")
        case .grdb: ("#1f77b4", "square")
        case .grdbRecord: ("#17becf", "diamond")
        case .fluent: ("#d62728", "triangle")
        case .loom: ("#2ca02c", "circle")
        }
        switch shape {
        case "square":
            return "<rect x=\"\(f(x - 4))\" y=\"\(f(y - 4))\" width=\"8\" height=\"8\" fill=\"\(color)\">\(tip)</rect>\n"
        case "diamond":
            return "<polygon points=\"\(f(x)),\(f(y - 5)) \(f(x + 5)),\(f(y)) \(f(x)),\(f(y + 5)) \(f(x - 5)),\(f(y))\" fill=\"\(color)\">\(tip)</polygon>\n"
        case "triangle":
            return "<polygon points=\"\(f(x)),\(f(y - 5)) \(f(x + 5)),\(f(y + 4)) \(f(x - 5)),\(f(y + 4))\" fill=\"\(color)\">\(tip)</polygon>\n"
        default:
            return "<circle cx=\"\(f(x))\" cy=\"\(f(y))\" r=\"4.5\" fill=\"\(color)\" fill-opacity=\"0.85\">\(tip)</circle>\n"
        }
    }

    static func text(_ x: Double, _ y: Double, _ content: String, size: Int? = nil, weight: String? = nil,
                     anchor: String? = nil, fill: String? = nil) -> String {
        var attributes = "x=\"\(f(x))\" y=\"\(f(y))\""
        if let size { attributes += " font-size=\"\(size)\"" }
        if let weight { attributes += " font-weight=\"\(weight)\"" }
        if let anchor { attributes += " text-anchor=\"\(anchor)\"" }
        if let fill { attributes += " fill=\"\(fill)\"" }
        return "<text \(attributes)>\(escape(content))</text>\n"
    }

    /// XML text: `&`, `<`, `>` and quotes escaped.
    static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(character)
            }
        }
        return out
    }

    private static func f(_ value: Double) -> String { String(format: "%.1f", value) }
}

/// What the chart reads of a `--json` file: only the fields it needs, so that the JSON of older
/// runs decodes too.
struct ChartInput: Decodable, Equatable {
    struct Workload: Decodable, Equatable {
        var id: String
        var available: Bool
        var labels: [String: String]?
        var metrics: [Metric]

        enum CodingKeys: String, CodingKey { case id, available, labels, metrics }

        init(id: String, available: Bool, labels: [String: String]? = nil, metrics: [Metric]) {
            self.id = id
            self.available = available
            self.labels = labels
            self.metrics = metrics
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            available = try container.decode(Bool.self, forKey: .available)
            labels = try container.decodeIfPresent([String: String].self, forKey: .labels)
            metrics = try container.decodeIfPresent([Metric].self, forKey: .metrics) ?? []
        }
    }

    struct Metric: Decodable, Equatable {
        var key: String
        var label: String
        var unit: String
        var loomRatios: [String: Double]
        var target: Target?
    }

    struct Target: Decodable, Equatable {
        var kind: String
        /// As printed, e.g. `≤ 1.50× raw` or `≥ 85% raw`.
        var target: String
        /// The limit (newer files), else read from `target`'s text.
        var limit: Double?

        /// The limit of a ratio target (a ratio, or a share of raw's throughput), `nil` for a
        /// time target.
        var ratioLimit: Double? {
            switch kind {
            case "maxRatioToRaw", "maxRatioToContender", "minRatioToRaw":
                if let limit { return limit }
                guard let number = Self.firstNumber(in: target) else { return nil }
                return kind == "minRatioToRaw" && target.contains("%") ? number / 100 : number
            default:
                return nil
            }
        }

        static func firstNumber(in text: String) -> Double? {
            let digits = text.drop { !$0.isNumber }.prefix { $0.isNumber || $0 == "." }
            return Double(digits)
        }
    }

    var workloads: [Workload]
    /// What produced the run: Loom's revision, the date and the machine, when the file says.
    var caption: String?

    enum CodingKeys: String, CodingKey { case workloads, environment, command }
    enum EnvironmentKeys: String, CodingKey { case date, cores, loomRevision, loadAverageAtStart, loadAverageAtEnd }

    /// Decodes a `--json` file's contents (non-finite numbers written as "inf", "-inf", "nan").
    static func decode(_ data: Data) throws -> ChartInput {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return try decoder.decode(ChartInput.self, from: data)
    }

    init(workloads: [Workload], caption: String? = nil) {
        self.workloads = workloads
        self.caption = caption
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        workloads = try container.decode([Workload].self, forKey: .workloads)
        if let environment = try? container.nestedContainer(keyedBy: EnvironmentKeys.self, forKey: .environment) {
            var parts: [String] = []
            if let revision = try? environment.decode(String.self, forKey: .loomRevision) { parts.append("Loom \(revision)") }
            if let date = try? environment.decode(String.self, forKey: .date) { parts.append(date) }
            if let cores = try? environment.decode(Int.self, forKey: .cores) { parts.append("\(cores) cores") }
            // The one-minute load averages at the start and the end of the run.
            if let start = try? environment.decode(String.self, forKey: .loadAverageAtStart) {
                let end = (try? environment.decode(String.self, forKey: .loadAverageAtEnd)) ?? "?"
                let first = { (text: String) in text.split(separator: " ").first.map(String.init) ?? text }
                parts.append("load \(first(start)) → \(first(end))")
            }
            caption = parts.isEmpty ? nil : parts.joined(separator: " · ") + " · median over rounds of Loom ÷ contender in the same round"
        }
    }
}
