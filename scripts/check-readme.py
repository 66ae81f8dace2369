"""Checks that README.md's quick start is, line for line, the code that
Tests/LoomTests/ReadmeQuickStartTests.swift compiles and runs."""
import pathlib, re, sys

root = pathlib.Path(__file__).resolve().parent.parent
readme = (root / "README.md").read_text()
test = (root / "Tests/LoomTests/ReadmeQuickStartTests.swift").read_text()

block = re.search(r"<!-- quick-start -->\s*```swift\n(.*?)```", readme, re.S)
region = re.search(r"// BEGIN README QUICK START\n(.*?)// END README QUICK START", test, re.S)
if not block or not region:
    sys.exit("check-readme: missing the <!-- quick-start --> block in README.md or the markers in the test")
if block.group(1).strip() != region.group(1).strip():
    import difflib
    print("\n".join(difflib.unified_diff(block.group(1).splitlines(), region.group(1).splitlines(), "README.md", "ReadmeQuickStartTests.swift", lineterm="")))
    sys.exit("check-readme: README's quick start differs from the test that compiles it")
print("README quick start is compiled by ReadmeQuickStartTests.swift")
