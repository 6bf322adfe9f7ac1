#!/usr/bin/env python3
"""scripts/gpu_offline.sh without apt or a GPU: its arguments, its refusals, and `run` over a pack
made here (a Debian package of a pkg-config file built with dpkg-deb, a source tarball): the
command finds the package through pkg-config, gets SPECD_NO_APT and SPECD_SHARED, the source lands
in deps/llama/src, and the command's exit code is the script's. The script runs from a copy in a
temporary checkout, so nothing is written outside the test's folder.

    test_gpu_offline.py SCRIPT
"""
import io
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile

from test_gpu_bench import check, verdict, write


def fake_deb(tmp, out):
    """A package holding usr/lib/TRIPLET/pkgconfig/specdfake.pc (Cflags -I${includedir})."""
    triplet = platform.machine() + "-linux-gnu"
    tree = os.path.join(tmp, "debtree")
    write(os.path.join(tree, "DEBIAN", "control"), "Package: specdfake\nVersion: 1.0\nArchitecture: all\n"
          "Maintainer: specd tests <tests@example.invalid>\nDescription: a pkg-config file for a test\n")
    write(os.path.join(tree, "usr", "lib", triplet, "pkgconfig", "specdfake.pc"),
          "prefix=/usr\nincludedir=${prefix}/include\nName: specdfake\nDescription: test\nVersion: 1.0\n"
          "Cflags: -I${includedir}/specdfake\nLibs:\n")
    r = subprocess.run(["dpkg-deb", "--build", "--root-owner-group", tree, out], capture_output=True, text=True)
    return r.returncode == 0, r.stderr


def main():
    script = sys.argv[1]
    if not shutil.which("dpkg-deb") or not shutil.which("pkg-config"):
        print("SKIP: dpkg-deb or pkg-config is missing (Debian's dpkg and pkg-config)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        os.makedirs(os.path.join(repo, "scripts"))
        copy = os.path.join(repo, "scripts", "gpu_offline.sh")
        shutil.copy(script, copy)
        env = dict(os.environ, SPECD_OFFLINE_ROOT=os.path.join(tmp, "sysroot"))
        env.pop("SPECD_NO_APT", None)
        env.pop("SPECD_SHARED", None)

        def run(args):
            return subprocess.run(["/bin/bash", copy] + args, capture_output=True, text=True, timeout=60, env=env)

        r = run([])
        check("no verb: exit 2 and say which", r.returncode == 2 and "say pack or run" in r.stderr, r.stderr)
        r = run(["--help"])
        check("--help says both verbs", r.returncode == 0 and "pack [DIR]" in r.stdout and "run DIR CMD" in r.stdout, r.stdout)
        r = run(["run", os.path.join(tmp, "nothing"), "true"])
        check("run over a missing folder: exit 2 naming it", r.returncode == 2 and "no folder" in r.stderr, r.stderr)
        empty = os.path.join(tmp, "empty")
        os.makedirs(empty)
        r = run(["run", empty, "true"])
        check("run over a folder pack did not write: exit 2, say to pack", r.returncode == 2
              and "run scripts/gpu_offline.sh pack there first" in r.stderr, r.stderr)
        r = run(["run", empty])
        check("run without a command: exit 2", r.returncode == 2 and "a folder and a command" in r.stderr, r.stderr)
        r = run(["pack", os.path.join(tmp, "p")])
        check("pack without llama.cpp's source: exit 1, say to run deps.sh", r.returncode == 1
              and "run scripts/deps.sh first" in r.stderr and not os.path.exists(os.path.join(tmp, "p")), r.stderr)

        pack = os.path.join(tmp, "pack")
        os.makedirs(os.path.join(pack, "debs"))
        ok, err = fake_deb(tmp, os.path.join(pack, "debs", "specdfake_1.0_all.deb"))
        check("a test package is built", ok, err)
        with tarfile.open(os.path.join(pack, "llama-src.tar.gz"), "w:gz") as t:
            data = b"/* a stand-in */\n"
            info = tarfile.TarInfo("include/llama.h")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        write(os.path.join(pack, ".specd-release.json"), "{}\n")
        show = ('echo "cflags=$(pkg-config --cflags specdfake)"; echo "no_apt=$SPECD_NO_APT"; '
                'echo "shared=$SPECD_SHARED"; exit 7')
        r = run(["run", pack, "sh", "-c", show])
        sysroot = os.path.join(tmp, "sysroot")
        check("the command's exit code is the script's", r.returncode == 7, f"rc={r.returncode} {r.stderr}")
        check("pkg-config finds the package under the unpacked root", f"cflags=-I{sysroot}/usr/include/specdfake"
              in r.stdout, r.stdout + r.stderr)
        check("SPECD_NO_APT and SPECD_SHARED are set", "no_apt=1" in r.stdout and f"shared={pack}/shared" in r.stdout,
              r.stdout)
        check("llama.cpp's source lands in the checkout's deps/llama/src",
              os.path.exists(os.path.join(repo, "deps", "llama", "src", "include", "llama.h"))
              and os.path.exists(os.path.join(repo, "deps", "llama", "src", ".specd-release.json")), os.listdir(repo))
        # a source already there is kept
        write(os.path.join(repo, "deps", "llama", "src", "include", "llama.h"), "/* the checkout's own */\n")
        r = run(["run", pack, "true"])
        kept = open(os.path.join(repo, "deps", "llama", "src", "include", "llama.h")).read()
        check("a source already in deps/llama/src is kept", r.returncode == 0 and "checkout's own" in kept, kept)
    return verdict()


if __name__ == "__main__":
    sys.exit(main())
