"""In-the-wild talking faces, split once by speaker: validation for choosing, test for reporting.

    python -m training.motion.wild_set --repos DIR [--out .cache/wild]

`wild_set.json` is the recipe: each clip's public repository, its path there (and the
path of a same-length WAV beside it where the sound is not inside), its md5, the speaker,
and the split. Nothing of it is committed but the recipe: the clips' licences are unknown
or research-only (evaluation only, never training). Bring each repository with
`git clone https://github.com/<repo> DIR/<owner>__<name>` (only the listed files are read;
a bare git directory there works too; a listed `commit` needs the repository's history),
and this copies the listed files to --out, checking their md5.

The split is by speaker, fixed once (2026-12-07) before any measurement on these clips:
validation holds the speakers the motion model's constants were already fitted on
(../shared/data/real-talking: GRID's other speakers, CREMA-D 1001, two presidents) and four
new ones from four sources; test holds 22 others from nine sources (seven from five sources
first; then fifteen more, added to test alone, unseen by any choice: seven BBC speakers of
LRS2's samples, a Cantonese news anchor, a man in a noisy restaurant, six MEAD actors), and
is reported, never tuned on. A file gone from a repository's newest commit is read from
`commit`. docs/motion.md ("In the wild") has the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

RECIPE = Path(__file__).with_name("wild_set.json")
FOLDER = Path(".cache/wild")
SPLITS = ("validation", "test")


@dataclass(frozen=True)
class WildClip:
    repo: str
    path: str
    audio: str | None
    md5: str
    speaker: str
    split: str
    commit: str | None = None  # where the file is no longer in the repository's newest commit

    def local(self, folder: Path, path: str | None = None) -> Path:
        return folder / self.repo.replace("/", "__") / Path(path or self.path).name


def recipe() -> list[WildClip]:
    fields = WildClip.__dataclass_fields__
    return [WildClip(**{k: v for k, v in entry.items() if k in fields}) for entry in json.loads(RECIPE.read_text())]


def gather(repos: Path, out: Path) -> list[str]:
    """Copy every listed file from the repositories under `repos` to `out`; what went wrong, per file."""
    problems = []
    for clip in recipe():
        for path in filter(None, (clip.path, clip.audio)):
            target = clip.local(out, path)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                if not _copy(repos / clip.repo.replace("/", "__"), path, target, clip.commit):
                    problems.append(f"{clip.repo}: {path} not found")
                    continue
        if clip.local(out).exists() and _md5(clip.local(out)) != clip.md5:
            problems.append(f"{clip.repo}: {clip.path} differs from the recipe's (md5)")
    return problems


def _copy(repo: Path, path: str, target: Path, commit: str | None) -> bool:
    if (repo / path).is_file() and commit is None:
        shutil.copyfile(repo / path, target)
        return True
    git = ["git", "--git-dir", str(repo / ".git" if (repo / ".git").is_dir() else repo)]
    shown = subprocess.run([*git, "show", f"{commit or 'HEAD'}:{path}"], capture_output=True)
    if shown.returncode == 0:
        target.write_bytes(shown.stdout)
    return shown.returncode == 0


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=Path, required=True, help="a folder of <owner>__<name> checkouts")
    parser.add_argument("--out", type=Path, default=FOLDER)
    args = parser.parse_args()
    problems = gather(args.repos, args.out)
    print(json.dumps({"clips": len(recipe()), "problems": problems}, indent=1))
    raise SystemExit(1 if problems else 0)


if __name__ == "__main__":
    main()
