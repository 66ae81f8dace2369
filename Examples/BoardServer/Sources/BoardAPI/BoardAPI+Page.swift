import Foundation
import Hummingbird
import Loom

extension BoardAPI {
    /// `GET /boards/:id/live`: a page showing the board's cards, kept current by the stream of
    /// `GET /boards/:id/cards/events` (EventSource, and the few lines that apply its changes).
    func addPageRoutes(to router: Router<BasicRequestContext>) {
        router.get("boards/:id/live") { _, context in
            let id = try id(of: Board.self, context)
            let name = try await container.performBackgroundTask { context in try context.existingObject(with: id).name }
            let page = Self.livePage(board: id.primaryKey, name: name)
            return Response(
                status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-cache"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: page)))
        }
    }

    /// The page of board `board`. Its name is escaped for HTML; cards are put in the page as
    /// text (`textContent`), never as HTML.
    static func livePage(board: Int64, name: String) -> String {
        let escaped = name
            .replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
        return """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <title>\(escaped) · live</title>
            <style>
              body { font: 16px system-ui, sans-serif; margin: 2em; max-width: 40em; }
              ol { padding: 0; list-style: none; }
              li { border: 1px solid #ccc; border-radius: 6px; padding: .5em .8em; margin: .4em 0; }
              li small { color: #666; display: block; }
              #status { color: #666; }
            </style>
            </head>
            <body>
            <h1>\(escaped)</h1>
            <p id="status" data-state="connecting" data-events="0" data-changes="0">connecting…</p>
            <ol id="cards"></ol>
            <script>
            // The board's cards, in sections (one here), kept current by the stream's events:
            // "results" replaces them, "changes" applies Loom's live-query diff, in its order.
            const status = document.getElementById("status"), list = document.getElementById("cards");
            let sections = [];
            function render() {
              list.replaceChildren(...sections.flat().map(card => {
                const item = document.createElement("li"), details = document.createElement("small");
                item.dataset.id = card.id;
                item.append(card.title);
                details.textContent = card.details;
                item.append(details);
                return item;
              }));
            }
            function apply(change) {
              const at = p => [p.section, p.item], later = (a, b) => b[0] - a[0] || b[1] - a[1];
              for (const [s, i] of [...change.deleted.map(at), ...change.moved.map(m => at(m.from))].sort(later)) sections[s].splice(i, 1);
              for (const s of [...change.deletedSections].sort((a, b) => b - a)) sections.splice(s, 1);
              for (const s of change.insertedSections.map(x => x.index).sort((a, b) => a - b)) sections.splice(s, 0, []);
              const inserted = [...change.inserted.map(x => [x.at, x.card]), ...change.moved.map(x => [x.to, x.card])];
              for (const [p, card] of inserted.sort((a, b) => -later(at(a[0]), at(b[0])))) sections[p.section].splice(p.item, 0, card);
              for (const u of change.updated) sections[u.at.section][u.at.item] = u.card;
            }
            function count(name) { status.dataset[name] = Number(status.dataset[name]) + 1; }
            const events = new EventSource("/boards/\(board)/cards/events");
            events.addEventListener("results", e => { sections = JSON.parse(e.data).sections.map(s => s.cards); render(); count("events"); });
            events.addEventListener("changes", e => { apply(JSON.parse(e.data)); render(); count("events"); count("changes"); });
            events.addEventListener("error", e => { if (e.data) status.title = JSON.parse(e.data).error.message; });
            events.onopen = () => { status.dataset.state = "live"; status.textContent = "live"; };
            events.onerror = () => { status.dataset.state = "reconnecting"; status.textContent = "reconnecting…"; };
            </script>
            </body>
            </html>

            """
    }
}
