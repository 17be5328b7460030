"""The Windows job-object backend's logic, run here with kernel32 injected.

Strategy: ``core.platform.jobs`` takes its kernel32 as a parameter; here it
is a fake that keeps jobs, handles and threads in dicts and reads and
writes the real ctypes structures at the addresses the code passes, as the
DLL would. The tests check the order Windows needs (the child created
suspended, assigned, only then resumed), that every handle opened is closed
on every path, and that a job past 1,024 processes lists them all. The real
DLL wiring is type-checked with ``mypy --platform win32``.
"""

import ctypes
import os
from typing import Any

import psutil
import pytest

from core.platform import jobs
from core.platform.jobs import JobTree, JobTrees, ThreadEntry, WinApi, pid_list_type

CHILD = 4242
#: Threads on the machine: the suspended child's first, and another process's.
THREADS = [(7001, 999), (7002, CHILD), (7003, 998)]


class FakeKernel32:
    """kernel32 as the job code calls it, keeping its state in plain Python."""

    def __init__(self, *, fail: str = "", job_pids: list[int] | None = None) -> None:
        self.fail = fail
        self.error = 0
        self.calls: list[tuple[Any, ...]] = []
        self.open: dict[int, str] = {}
        self._next = 100
        self.job_pids: list[int] = list(job_pids or [])
        self.limit_flags = 0
        self.resumed: list[int] = []
        self._cursor: dict[int, int] = {}

    def _handle(self, what: str) -> int:
        self._next += 4
        self.open[self._next] = what
        return self._next

    def _failing(self, name: str, code: int = 5) -> bool:
        if self.fail == name:
            self.error = code
            return True
        return False

    def CreateJobObjectW(self, attributes: Any, name: Any) -> int | None:
        self.calls.append(("CreateJobObjectW",))
        return None if self._failing("CreateJobObjectW") else self._handle("job")

    def SetInformationJobObject(self, job: int, kind: int, address: int, size: int) -> int:
        self.calls.append(("SetInformationJobObject", kind))
        assert kind == jobs.JobObjectExtendedLimitInformation
        limits = jobs._ExtendedLimits.from_address(address)
        assert size == ctypes.sizeof(limits)
        self.limit_flags = limits.BasicLimitInformation.LimitFlags
        return 0 if self._failing("SetInformationJobObject") else 1

    def OpenProcess(self, access: int, inherit: bool, pid: int) -> int | None:
        self.calls.append(("OpenProcess", pid))
        return None if self._failing("OpenProcess") else self._handle(f"process {pid}")

    def AssignProcessToJobObject(self, job: int, process: int) -> int:
        self.calls.append(("AssignProcessToJobObject", self.open[process]))
        if self._failing("AssignProcessToJobObject"):
            return 0
        self.job_pids.append(int(self.open[process].split()[1]))
        return 1

    def CloseHandle(self, handle: int) -> int:
        self.calls.append(("CloseHandle", self.open.pop(handle)))
        return 1

    def QueryInformationJobObject(
        self, job: int, kind: int, address: int, size: int, returned: Any
    ) -> int:
        assert job in self.open
        if kind == jobs.JobObjectBasicAccountingInformation:
            jobs._Accounting.from_address(address).ActiveProcesses = len(self.job_pids)
            return 1
        assert kind == jobs.JobObjectBasicProcessIdList
        room = (size - 8) // ctypes.sizeof(ctypes.c_size_t)
        listing: Any = pid_list_type(room).from_address(address)
        listing.NumberOfAssignedProcesses = len(self.job_pids)
        listed = self.job_pids[:room]
        listing.NumberOfProcessIdsInList = len(listed)
        for i, pid in enumerate(listed):
            listing.ProcessIdList[i] = pid
        if len(listed) < len(self.job_pids):
            self.error = jobs.ERROR_MORE_DATA
            return 0
        return 1

    def TerminateJobObject(self, job: int, code: int) -> int:
        self.calls.append(("TerminateJobObject",))
        self.job_pids.clear()
        return 1

    def GetConsoleWindow(self) -> int:
        return 0

    def CreateToolhelp32Snapshot(self, flags: int, pid: int) -> int:
        assert flags == jobs.TH32CS_SNAPTHREAD
        return self._handle("snapshot")

    def _entry(self, snapshot: int, address: int) -> int:
        entry = ThreadEntry.from_address(address)
        assert entry.dwSize == ctypes.sizeof(ThreadEntry), "dwSize must be set first"
        index = self._cursor.get(snapshot, 0)
        if index >= len(THREADS):
            self.error = jobs.ERROR_NO_MORE_FILES
            return 0
        entry.th32ThreadID, entry.th32OwnerProcessID = THREADS[index]
        self._cursor[snapshot] = index + 1
        return 1

    def Thread32First(self, snapshot: int, address: int) -> int:
        self._cursor[snapshot] = 0
        return self._entry(snapshot, address)

    def Thread32Next(self, snapshot: int, address: int) -> int:
        return self._entry(snapshot, address)

    def OpenThread(self, access: int, inherit: bool, tid: int) -> int:
        assert access & jobs.THREAD_SUSPEND_RESUME
        return self._handle(f"thread {tid}")

    def ResumeThread(self, thread: int) -> int:
        tid = int(self.open[thread].split()[1])
        self.calls.append(("ResumeThread", tid))
        if self._failing("ResumeThread"):
            return jobs.RESUME_FAILED
        self.resumed.append(tid)
        return 1  # its suspend count before: created suspended


def api_for(k32: FakeKernel32) -> WinApi:
    return WinApi(k32, lambda: k32.error, lambda pid: k32.calls.append(("break", pid)))


def test_a_child_is_created_suspended_and_resumed_only_once_it_is_in_its_job() -> None:
    k32 = FakeKernel32()
    options = JobTrees(api_for(k32)).popen_options()
    flags = options["creationflags"]
    assert flags & jobs.CREATE_SUSPENDED and flags & jobs.CREATE_NEW_PROCESS_GROUP
    assert flags & jobs.CREATE_NO_WINDOW, "no console: no console window per child either"

    tree = JobTree(CHILD, api_for(k32))
    names = [call[0] for call in k32.calls]
    assert names.index("AssignProcessToJobObject") < names.index("ResumeThread")
    assert k32.limit_flags & jobs.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    # The child's own thread, not another process's.
    assert k32.resumed == [7002]
    # Only the job's handle stays open, until release.
    assert list(k32.open.values()) == ["job"]
    assert tree.alive()
    tree.release()
    assert k32.open == {}


@pytest.mark.parametrize(
    "step", ["SetInformationJobObject", "OpenProcess", "AssignProcessToJobObject"]
)
def test_a_failed_step_closes_every_handle_and_never_resumes_the_child(step: str) -> None:
    k32 = FakeKernel32(fail=step)
    with pytest.raises(OSError, match=step):
        JobTree(CHILD, api_for(k32))
    assert k32.open == {}, "no handle leaked"
    assert k32.resumed == []


def test_a_failed_resume_closes_the_job_which_ends_the_child_with_it() -> None:
    k32 = FakeKernel32(fail="ResumeThread")
    with pytest.raises(OSError, match="ResumeThread"):
        JobTree(CHILD, api_for(k32))
    # The job's handle was the last one: closing it ends the assigned child.
    assert ("CloseHandle", "job") in k32.calls
    assert k32.open == {}


def test_a_job_of_more_than_1024_processes_lists_every_one() -> None:
    crowd = [10_000 + i for i in range(3000)] + [os.getpid()]
    k32 = FakeKernel32(job_pids=crowd)
    tree = JobTree(CHILD, api_for(k32))
    try:
        listed = tree._pids()
        assert len(listed) == len(crowd) + 1  # the crowd and the child
        assert set(listed) == set(crowd) | {CHILD}
        assert tree.contains(psutil.Process(os.getpid()))
        assert psutil.Process(os.getpid()) in tree.members()
    finally:
        tree.release()


def test_the_polite_step_is_a_break_to_the_childs_group_and_the_hard_one_ends_the_job() -> None:
    k32 = FakeKernel32()
    tree = JobTree(CHILD, api_for(k32))
    tree.terminate()
    assert ("break", CHILD) in k32.calls
    tree.kill()
    assert not tree.alive()
    tree.release()
    assert not tree.alive() and tree._pids() == []
