"""Checks that every README.md code block marked `<!-- compiled: NAME -->` is, line for line,
the code between `// BEGIN README NAME` and `// END README NAME` in a test under Tests/, so that
the README only shows code that compiles and runs."""
import pathlib, re, sys, difflib

root = pathlib.Path(__file__).resolve().parent.parent
readme = (root / "README.md").read_text()
tests = "\n".join(p.read_text() for p in sorted((root / "Tests").rglob("*.swift")))

blocks = re.findall(r"<!-- compiled: ([A-Z ]+) -->\s*```swift\n(.*?)```", readme, re.S)
if not blocks:
    sys.exit("check-readme: README.md has no <!-- compiled: NAME --> blocks")
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
