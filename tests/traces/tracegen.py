"""What the hand-written trace generators here share: writing NAME.jsonl and a base archive
NAME.base.tar.gz that is the same bytes on every run (fixed mtimes, no gzip timestamp), so a
regenerated trace shows no diff unless its content changed."""
import gzip, io, json, tarfile

MTIME = 1700000000


def write_trace(name, header, steps):
    with open(f"{name}.jsonl", "w") as f:
        f.write(json.dumps(header) + "\n")
        for s in steps:
            f.write(json.dumps(s) + "\n")


def write_base(name, files, links=None, fifos=(), listed=()):
    """files: path -> str or bytes; links: path -> target; fifos: paths. The listing of every
    path (`.worldfs-base-listing`) is added, with `listed`: paths of the repository that the
    archive leaves out, as real bases do."""
    links = links or {}
    every = list(files) + list(links) + list(fifos) + list(listed)
    listing = "".join(p + "\n" for p in sorted(every))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        def add(info, data=None):
            info.mtime = MTIME
            t.addfile(info, io.BytesIO(data) if data is not None else None)
        for path, data in list(files.items()) + [(".worldfs-base-listing", listing)]:
            data = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            add(info, data)
        for path, target in links.items():
            info = tarfile.TarInfo(path)
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
            add(info)
        for path in fifos:
            info = tarfile.TarInfo(path)
            info.type, info.mode = tarfile.FIFOTYPE, 0o644
            add(info)
    with open(f"{name}.base.tar.gz", "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as z:
        z.write(buf.getvalue())
