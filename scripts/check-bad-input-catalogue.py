"""Checks the bad-input catalogue (Sources/Loom/Loom.docc/BadInput.md): every row of its tables
names, in its last column, a test as `Suite.function` that exists under Tests/ (a `func function(`
in a file declaring `struct Suite` or `extension Suite`); row numbers are 1, 2, 3… without gaps;
the refused inputs (the rows of every table but the last, "Accepted as given") number at least 60;
and every test of Tests/LoomTests/BadInput is named by a row, so that a test cannot silently leave
the catalogue."""
import pathlib, re, sys

root = pathlib.Path(__file__).resolve().parent.parent
catalogue = root / "Sources/Loom/Loom.docc/BadInput.md"
minimum = 60

sources = {p: p.read_text() for p in sorted((root / "Tests").rglob("*.swift"))}

def declares(suite, text):
    return re.search(r"\b(struct|extension|final class|class|enum)\s+" + re.escape(suite) + r"\b", text)

def test_exists(suite, function):
    return any(declares(suite, text) and re.search(r"\bfunc\s+" + re.escape(function) + r"\s*\(", text)
               for text in sources.values())

rows, refused, failures = [], 0, []
accepted_section = False
for number, line in enumerate(catalogue.read_text().splitlines(), 1):
    if line.startswith("## "):
        accepted_section = line.strip() == "## Accepted as given"
    if not line.startswith("|") or re.match(r"^\|\s*(#|-)", line):
        continue
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    tests = re.findall(r"`([A-Za-z]+Tests)\.([A-Za-z0-9_]+)`", cells[-1])
    if not tests:
        failures.append(f"line {number}: the last column names no test as `Suite.function`: {cells[-1]}")
        continue
    if not cells[0].isdigit():
        failures.append(f"line {number}: the first column is not a row number: {cells[0]}")
        continue
    rows.append(int(cells[0]))
    if not accepted_section:
        refused += 1
    for suite, function in tests:
        if not test_exists(suite, function):
            failures.append(f"line {number}: no test {suite}.{function} under Tests/")

if rows != list(range(1, len(rows) + 1)):
    failures.append(f"rows are not numbered 1 to {len(rows)} in order")
if refused < minimum:
    failures.append(f"the catalogue has {refused} kinds of refused input; it must have at least {minimum}")

named = set(re.findall(r"`([A-Za-z]+Tests)\.([A-Za-z0-9_]+)`", catalogue.read_text()))
for path, text in sources.items():
    if "LoomTests/BadInput/" not in str(path):
        continue
    suite = re.search(r"struct\s+(\w+Tests)\b", text)
    if not suite:
        continue
    for function in re.findall(r"@Test\b.*?\bfunc\s+(\w+)\s*\(", text, re.S):
        if (suite.group(1), function) not in named:
            failures.append(f"{path.relative_to(root)}: {suite.group(1)}.{function} is not in the catalogue")

if failures:
    print("\n".join(failures))
    sys.exit("check-bad-input-catalogue: the catalogue and the tests differ")
print(f"bad-input catalogue: {refused} kinds of refused input and {len(rows) - refused} accepted, each naming a test that exists")
