"""ddcheck's own child processes, one protocol (ddcheck/base/children.py): config's, smoke's and the
audit's children are all asked through it; a child that ends, hangs or writes no answer is said, never
a hang or a traceback."""

from __future__ import annotations

import os
import textwrap

from ddcheck.base.children import Child, Kept

ECHO = textwrap.dedent('''
    import os, sys, time
    from ddcheck.base.children import serve

    def answer(req):
        if req.get("die"):
            os._exit(7)
        if req.get("sleep"):
            time.sleep(req["sleep"])
        return {"got": req, "args": sys.argv[3:], "tmp": __import__("tempfile").gettempdir(), "pid": os.getpid()}

    serve(answer)
''')


def _child(tmp_path, *args):
    (tmp_path / "echo_child.py").write_text(ECHO)
    return Child([str(tmp_path / "echo_child.py")], dict(os.environ), args)


def test_a_child_answers_each_request_in_turn_with_its_arguments_and_folder(tmp_path):
    with _child(tmp_path, "offline") as child:
        first = child.ask({"n": 1}, 60)
        second = child.ask({"n": 2}, 60)
        folder = child.folder
        assert first["got"] == {"n": 1} and second["got"] == {"n": 2}  # the answer file's name is not the request's
        assert first["args"] == ["offline"] and first["tmp"] == folder  # its temporary files go with its folder
        assert child.alive()
    assert not os.path.exists(folder) and not child.alive()


def test_a_child_that_ends_or_hangs_is_said_with_why(tmp_path):
    with _child(tmp_path) as child:
        died = child.ask({"die": True}, 60)["died"]
        assert died.startswith("ended (exit status 7)")
        assert child.ask({"n": 1}, 60)["died"].startswith("ended before it was asked")
    with _child(tmp_path) as child:
        assert child.ask({"sleep": 30}, 1) == {"died": "did not answer within 1 s"}
        assert not child.alive()


def test_kept_children_serve_their_keys_next_requests_and_no_other_key(tmp_path):
    """The audit's kept smoke children (ddcheck/audit/runner.py): a key's next request goes to the child
    that served it; another key gets a process of its own; a child that died, or that its caller closed,
    is not handed out again; no more than ``keep`` wait, the least recently used ended first."""
    (tmp_path / "echo_child.py").write_text(ECHO)
    command, env = [str(tmp_path / "echo_child.py")], dict(os.environ)
    with Kept(keep=2) as kept:
        def pid(key, req=None):
            with kept.lease(key, command, env) as child:
                answer = child.ask(req or {}, 60)
                return answer.get("pid"), child
        a1, child_a = pid("a")
        a2, _ = pid("a")
        b, _ = pid("b")
        assert a1 == a2 != b
        assert pid("a", {"die": True})[0] is None and not child_a.alive()  # died: not kept
        a3, child_a = pid("a")
        assert a3 not in (None, a1)
        with kept.lease("a", command, env) as child:
            child.close()  # the caller's word: it serves no other run
        assert pid("a")[0] != a3
        _, child_c = pid("c")  # three keys, two kept: "b" waited longest
        assert pid("b")[0] != b
        assert child_c.alive()  # waiting for "c"
    assert not child_c.alive()  # ended with the pool
