"""Drives `slapo-lua repl` through a pseudo-terminal: types, presses TAB, reads the screen.

Usage: /usr/bin/python3 tests/cli/repl_pty.py BUILD/slapo-lua
"""
import os
import pty
import select
import sys
import tempfile
import time


class Screen:
    """Everything the REPL wrote, read on demand; expect() consumes up to what it found."""

    def __init__(self, fd):
        self.fd = fd
        self.data = b""
        self.pos = 0

    def _read(self, wait):
        ready, _, _ = select.select([self.fd], [], [], wait)
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 4096)
        except OSError:
            return False
        self.data += chunk
        return bool(chunk)

    def expect(self, needle, timeout=20.0):
        end = time.time() + timeout
        while True:
            found = self.data.find(needle.encode(), self.pos)
            if found >= 0:
                self.pos = found + len(needle)
                return
            if time.time() > end or not self._read(0.1):
                raise AssertionError(f"did not see {needle!r}; screen:\n{self.data[self.pos:].decode(errors='replace')}")

    def until_eof(self, timeout=20.0):
        end = time.time() + timeout
        while time.time() < end:
            if not self._read(0.1):
                return
        raise AssertionError(f"the REPL did not exit; screen:\n{self.data[self.pos:]!r}")


def main(binary):
    state = tempfile.mkdtemp()
    env = dict(os.environ, XDG_STATE_HOME=state, TERM="xterm")
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(binary, [binary, "repl"], env)
    screen = Screen(fd)

    def send(text):
        os.write(fd, text.encode())

    def prompt():
        screen.expect("slapo> ")
        time.sleep(0.2)  # libedit switches the terminal to raw mode as the prompt appears

    prompt()
    send('m = slapo.models.gpt2("gpt2", {device = "meta"})\r')
    prompt()
    send("sch = slapo.create_schedule(m)\r")
    prompt()
    # TAB inside sch["...: the only child of transformer.h.0 starting with "at" is attn. The screen
    # holds cursor moves, so the completion shows in what the line evaluates to.
    send('sch["transformer.h.0.at\t')
    time.sleep(0.3)
    send('"].mod:type()\r')
    screen.expect("GPT2Attention")
    prompt()
    # TAB after a colon completes methods: sch:chi -> sch:children
    send("#sch:chi\t")
    time.sleep(0.3)
    send("()\r")
    screen.expect("\n2")
    prompt()
    # a multi-line chunk continues; an error keeps the prompt
    send("for i = 1, 2 do\r")
    screen.expect(">> ")
    send("print('line', i) end\r")
    screen.expect("line\t2")
    prompt()
    send('sch["transformer.nope"]\r')
    screen.expect("no module 'nope' under 'transformer'")
    prompt()
    send("40 + 2\r")
    screen.expect("42")
    prompt()
    send("\x04")  # Ctrl-D on an empty line quits
    screen.until_eof()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    history = open(os.path.join(state, "slapo-lua", "history")).read()
    assert "create_schedule" in history, history
    print("repl ok")


if __name__ == "__main__":
    main(sys.argv[1])
