#!/usr/bin/env bash
# everyday-tools.sh DIR: what tools do in a project, checked one by one in DIR (an empty
# directory). Prints `ok NAME` or `FAIL NAME: why` per check and exits 1 if any failed.
#
# tests/mount_everyday.rs runs it natively and through mounts (both I/O modes, and as a user
# other than root) and wants every check to pass everywhere: sqlite with its WAL, shared mmap,
# fifos and Unix sockets in the tree, flock and POSIX locks, O_TMPFILE, copy_file_range and
# reflink copies, renameat2, odd names, a sparse 5 GiB file, building and running a binary,
# concurrent appends, tail -f, hard links, xattrs, git, a venv, inotify on the tree.
# Needs bash, python3, cc and git.
D=${1:?usage: everyday-tools.sh DIR}
cd "$D" || exit 1
failed=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1: $2"; failed=1; }
t(){ local name=$1; shift; local out; if out=$("$@" 2>&1); then ok "$name"; else bad "$name" "$(echo "$out"|tail -2|tr '\n' ' ')"; fi; }
t sqlite_wal python3 -c '
import sqlite3
c=sqlite3.connect("db.sqlite"); c.execute("pragma journal_mode=wal"); c.execute("create table if not exists t(x)")
for i in range(200): c.execute("insert into t values (?)",(i,))
c.commit(); c2=sqlite3.connect("db.sqlite"); assert c2.execute("select count(*) from t").fetchone()[0]>=200
c.execute("pragma wal_checkpoint(truncate)"); c.close(); c2.close()'
t sqlite_default python3 -c '
import sqlite3
c=sqlite3.connect("db2.sqlite"); c.execute("create table if not exists t(x)")
for i in range(100):
  c.execute("insert into t values (?)",(i,)); c.commit()
assert c.execute("select count(*) from t").fetchone()[0]>=100'
t mmap_shared python3 -c '
import mmap,os
f=open("mm.bin","w+b"); f.truncate(1<<20); m=mmap.mmap(f.fileno(),1<<20); m[100:105]=b"hello"; m.flush(); m.close(); f.close()
assert open("mm.bin","rb").read()[100:105]==b"hello"'
t fifo bash -c 'rm -f ff; mkfifo ff && (echo hi > ff &) && read x < ff && [ "$x" = hi ]'
t unix_socket python3 -c '
import socket,os
p="s.sock"
try: os.unlink(p)
except FileNotFoundError: pass
s=socket.socket(socket.AF_UNIX); s.bind(p); s.listen(1)
c=socket.socket(socket.AF_UNIX); c.connect(p); a,_=s.accept(); c.send(b"x"); assert a.recv(1)==b"x"; os.unlink(p)'
t flock bash -c 'exec 9>lockf; flock -n 9 && ! flock -n lockf true'
t fcntl_lock python3 -c '
import fcntl,os,subprocess,sys
f=open("lk","w"); fcntl.lockf(f,fcntl.LOCK_EX)
r=subprocess.run([sys.executable,"-c","import fcntl;f=open(\"lk\",\"w\");fcntl.lockf(f,fcntl.LOCK_EX|fcntl.LOCK_NB)"]); assert r.returncode!=0'
t o_tmpfile python3 -c '
import os
fd=os.open(".",os.O_TMPFILE|os.O_WRONLY,0o644); os.write(fd,b"tmp")
try: os.unlink("linked")
except FileNotFoundError: pass
import ctypes; libc=ctypes.CDLL(None,use_errno=True); r=libc.linkat(fd,b"",-100,b"linked",0x1000); assert r==0,os.strerror(ctypes.get_errno()); assert open("linked").read()=="tmp"'
t copy_file_range python3 -c '
import os
open("src.bin","wb").write(os.urandom(300000)); a=os.open("src.bin",os.O_RDONLY); b=os.open("dst.bin",os.O_WRONLY|os.O_CREAT|os.O_TRUNC)
n=0
while n<300000: n+=os.copy_file_range(a,b,300000-n)
os.close(b); assert open("src.bin","rb").read()==open("dst.bin","rb").read()'
t cp_reflink bash -c 'cp --reflink=auto src.bin r.bin && cmp src.bin r.bin'
t rename_exchange python3 -c '
import ctypes,os
open("ea","w").write("A"); open("eb","w").write("B")
libc=ctypes.CDLL(None,use_errno=True); r=libc.renameat2(-100,b"ea",-100,b"eb",2)
assert r==0,os.strerror(ctypes.get_errno()); assert open("ea").read()=="B" and open("eb").read()=="A"'
t rename_noreplace python3 -c '
import ctypes,os,errno
libc=ctypes.CDLL(None,use_errno=True); r=libc.renameat2(-100,b"ea",-100,b"eb",1)
assert r==-1 and ctypes.get_errno()==errno.EEXIST'
t nonutf8_name python3 -c '
import os
n=b"bad\xff\xfename"; open(n,"wb").write(b"z"); assert n in os.listdir(b"."); os.unlink(n)'
t long_name python3 -c '
import os
n="x"*255; open(n,"w").write("z"); assert os.path.exists(n); os.unlink(n)'
t sparse_big python3 -c '
import os
f=open("big.sparse","wb"); f.seek(5*2**30); f.write(b"end"); f.close(); f=open("big.sparse","rb"); f.seek(5*2**30); assert f.read()==b"end"; os.unlink("big.sparse")'
t exec_binary bash -c 'printf "int main(){return 7;}" > p.c && cc -o prog p.c && { ./prog; [ $? = 7 ]; }'
t exec_script bash -c 'printf "#!/bin/sh\necho yes\n" > sc.sh && chmod +x sc.sh && [ "$(./sc.sh)" = yes ]'
t write_then_exec_etxtbsy bash -c 'cp prog prog2 && ./prog2; [ $? = 7 ]'
t append_concurrent bash -c 'rm -f ap; for i in $(seq 1 4); do (for j in $(seq 1 200); do echo "$i-$j" >> ap; done) & done; wait; [ $(wc -l < ap) = 800 ]'
t tail_follow bash -c 'rm -f tl; : > tl; (timeout 3 tail -f tl > tl.out &) ; sleep 0.5; echo line >> tl; sleep 1.5; grep -q line tl.out'
t truncate_while_mmapped python3 -c '
import mmap,os
open("tm","wb").write(b"a"*8192); f=open("tm","r+b"); m=mmap.mmap(f.fileno(),8192); os.truncate("tm",4096); assert os.path.getsize("tm")==4096; m.close()'
t hardlink bash -c 'echo h > h1 && ln -f h1 h2 && echo more >> h2 && [ "$(cat h1)" = "$(printf "h\nmore")" ] && [ $(stat -c %h h1) = 2 ]'
t symlink_dangling bash -c 'ln -sfn nowhere dl && [ "$(readlink dl)" = nowhere ] && ! [ -e dl ]'
t xattr_user python3 -c '
import os
open("xa","w").write("x"); os.setxattr("xa","user.k",b"v"); assert os.getxattr("xa","user.k")==b"v"; assert "user.k" in os.listxattr("xa"); os.removexattr("xa","user.k")'
t utimes_ns python3 -c '
import os
open("ut","w"); os.utime("ut",ns=(1,123456789)); assert os.stat("ut").st_mtime_ns==123456789'
t git_flow bash -c 'rm -rf g && mkdir g && cd g && git init -q && echo a > a && git add a && git -c user.email=a@b -c user.name=n commit -qm m && echo b >> a && git -c user.email=a@b -c user.name=n commit -qam m2 && git gc -q && git fsck --no-progress 2>/dev/null && [ -z "$(git status --porcelain)" ]'
t venv bash -c 'rm -rf venv && python3 -m venv --without-pip venv && venv/bin/python -c "import sys; print(sys.prefix)" | grep -q venv'
t dir_rename_deep bash -c 'rm -rf dr dr2 && mkdir -p dr/a/b/c && echo deep > dr/a/b/c/f && mv dr dr2 && [ "$(cat dr2/a/b/c/f)" = deep ]'
t rmdir_nonempty bash -c 'mkdir -p ne && touch ne/x && ! rmdir ne 2>/dev/null && rm -r ne'
t statfs bash -c 'df -P . | tail -1 | awk "{exit !(\$2>0)}"'
t fallocate bash -c 'fallocate -l 1M fa && [ $(stat -c %s fa) = 1048576 ]'
t seek_hole python3 -c '
import os
f=os.open("sh",os.O_RDWR|os.O_CREAT|os.O_TRUNC); os.pwrite(f,b"x",1<<20); d=os.lseek(f,0,os.SEEK_DATA); assert 0 <= d <= 1<<20, d'
t readdir_large bash -c 'rm -rf many && mkdir many && (cd many && seq 1 3000 | xargs touch) && [ $(ls many | wc -l) = 3000 ] && rm -rf many'
t inotify_on_mount python3 -c '
import ctypes,os,struct,select
libc=ctypes.CDLL(None); fd=libc.inotify_init1(os.O_NONBLOCK); wd=libc.inotify_add_watch(fd,b".",0x100|0x2)
open("inw","w").write("1")
r,_,_=select.select([fd],[],[],2); assert r'
exit $failed
