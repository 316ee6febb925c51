"""The wild set's recipe: split by speaker once, and gathered only as listed (md5 checked)."""

from training.motion import wild_set


def test_the_split_is_by_speaker_and_the_test_split_spans_sources():
    clips = wild_set.recipe()
    assert {c.split for c in clips} == set(wild_set.SPLITS)
    speakers = {split: {c.speaker for c in clips if c.split == split} for split in wild_set.SPLITS}
    assert not speakers["validation"] & speakers["test"], "a speaker in both splits"
    assert len(speakers["test"]) >= 12 and len({c.repo for c in clips if c.split == "test"}) >= 4


def test_gathering_copies_the_listed_files_and_refuses_others(tmp_path):
    repos, out = tmp_path / "repos", tmp_path / "out"
    assert len(wild_set.gather(repos, out)) == sum(1 + bool(c.audio) for c in wild_set.recipe())  # none found
    for clip in wild_set.recipe():
        for path in filter(None, (clip.path, clip.audio)):
            listed = repos / clip.repo.replace("/", "__") / path
            listed.parent.mkdir(parents=True, exist_ok=True)
            listed.write_bytes(b"not the clip")
    problems = wild_set.gather(repos, tmp_path / "again")
    at_head = [c for c in wild_set.recipe() if c.commit is None]  # the others need the repository's history
    assert sum("md5" in p for p in problems) == len(at_head), problems
    assert sum("not found" in p for p in problems) == len(wild_set.recipe()) - len(at_head), problems
    first = wild_set.recipe()[0]
    assert first.local(tmp_path / "again").read_bytes() == b"not the clip"
