"""Checks that every code block marked `<!-- compiled: NAME -->` in README.md and in the DocC
articles (Sources/Loom/Loom.docc) is, line for line, the code between `// BEGIN README NAME` and
`// END README NAME` in a test under Tests/, so that the documentation only shows code that
compiles and runs."""
import pathlib, re, sys, difflib

root = pathlib.Path(__file__).resolve().parent.parent
documents = [root / "README.md"] + sorted((root / "Sources/Loom/Loom.docc").glob("*.md"))
readme = "\n".join(p.read_text() for p in documents)
tests = "\n".join(p.read_text() for p in sorted((root / "Tests").rglob("*.swift")))

blocks = re.findall(r"<!-- compiled: ([A-Z ]+) -->\s*```swift\n(.*?)```", readme, re.S)
if not blocks:
    sys.exit("check-readme: the documentation has no <!-- compiled: NAME --> blocks")
failed = False
for name, block in blocks:
    region = re.search(r"// BEGIN README " + re.escape(name) + r"\n(.*?)// END README " + re.escape(name), tests, re.S)
    if not region:
        print(f"check-readme: no test holds '// BEGIN README {name}'")
        failed = True
        continue
    want = [line.strip() for line in block.strip().splitlines()]
    have = [line.strip() for line in region.group(1).strip().splitlines()]
    if want != have:
        print("\n".join(difflib.unified_diff(want, have, "README.md", f"tests ({name})", lineterm="")))
        failed = True
    else:
        print(f"README block '{name}' is compiled by the tests")
if failed:
    sys.exit("check-readme: README code differs from the code the tests compile")
