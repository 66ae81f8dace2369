"""Checks that every commit since BASE has a subject of at most 72 characters, so that
`git log --oneline` reads as a history and the detail goes in the body (STYLE.md).

Commits up to BASE (issue 40's start) are not judged. A checkout without git, or whose history
does not reach BASE (a shallow clone), is not checked, and says so."""
import pathlib, subprocess, sys

BASE = "8fb49a780dbfcc71547891c9e89c8f4cadc9cdcd"
LIMIT = 72
root = pathlib.Path(__file__).resolve().parent.parent

def git(*args):
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)

if git("rev-parse", "--git-dir").returncode != 0:
    print("check-commit-subjects: not a git checkout, nothing to check")
    sys.exit(0)
if git("merge-base", "--is-ancestor", BASE, "HEAD").returncode != 0:
    print(f"check-commit-subjects: the history does not reach {BASE[:7]}, nothing to check")
    sys.exit(0)
# %s joins a first paragraph of several lines into one: a message without a blank line after
# its first line counts whole.
log = git("log", "--format=%h %s", f"{BASE}..HEAD")
if log.returncode != 0:
    sys.exit(f"check-commit-subjects: git log failed: {log.stderr.strip()}")
commits = log.stdout.splitlines()
long = [line for line in commits if len(line.split(" ", 1)[1]) > LIMIT]
for line in long:
    commit, subject = line.split(" ", 1)
    print(f"{commit}: a subject of {len(subject)} characters (at most {LIMIT}; the detail goes in the body):")
    print(f"    {subject}")
if long:
    sys.exit(f"check-commit-subjects: {len(long)} of {len(commits)} commits since {BASE[:7]} have a subject over {LIMIT} characters")
print(f"check-commit-subjects: {len(commits)} commits since {BASE[:7]}, every subject at most {LIMIT} characters")
