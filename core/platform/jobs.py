"""Windows: each child in a Job Object of its own.

The job is made with ``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE``: the tray holds
its only handle, so when the tray ends, however it ends (Quit, a crash,
Task Manager), Windows closes the handle and ends every process of the job
— the child and all it started, whatever psutil's stale parent links say.

- Spawn: ``CREATE_SUSPENDED`` and ``CREATE_NEW_PROCESS_GROUP`` (so
  ``CTRL_BREAK_EVENT`` can address the child's group); then the job is made,
  the child assigned to it, and only then its thread resumed, so nothing it
  starts can run outside the job. ``subprocess`` closes the thread handle
  ``CreateProcess`` returned (CPython's ``_execute_child``) and cannot pass
  ``PROC_THREAD_ATTRIBUTE_JOB_LIST`` (its attribute list takes handles
  only), so the resume finds the child's threads with
  ``CreateToolhelp32Snapshot`` (a suspended new process has just its first)
  and ``ResumeThread``s each. Should any step fail, every handle opened is
  closed and the error raised: the spawn then kills the child, which never
  ran a line (closing a job it was assigned to ends it as well).
- Listing the job's processes asks for 1,024 pids and grows the buffer to
  what ``NumberOfAssignedProcesses`` says when Windows answers
  ERROR_MORE_DATA (a job past 1,024 processes read as empty before).
- The polite step is ``CTRL_BREAK_EVENT`` to the child's group. It reaches
  the child only when they share a console: a headless run in a terminal.
  The windowed tray has no console and starts children with
  ``CREATE_NO_WINDOW`` (else each would open a console window), so for them
  stdin EOF is the polite step, and the hard one comes after the grace.
- The hard step is ``TerminateJobObject``: the whole tree at once.

Everything goes through ``WinApi`` (kernel32, its last error, the break
signal), made from the real DLL on Windows; the logic imports everywhere,
so tests drive it with a fake kernel32 on Linux, and ``mypy --platform
win32`` checks the real wiring.
"""

import contextlib
import ctypes
import functools
import os
import subprocess
import sys
from collections.abc import Callable
from ctypes import wintypes
from dataclasses import dataclass
from typing import Any, Final

import psutil

from core.platform import procs
from core.platform.trees import Held, PsutilTrees, Tree

JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: Final = 0x2000
JobObjectBasicAccountingInformation: Final = 1
JobObjectBasicProcessIdList: Final = 3
JobObjectExtendedLimitInformation: Final = 9
PROCESS_TERMINATE: Final = 0x0001
PROCESS_SET_QUOTA: Final = 0x0100
THREAD_SUSPEND_RESUME: Final = 0x0002
TH32CS_SNAPTHREAD: Final = 0x00000004
#: INVALID_HANDLE_VALUE ((HANDLE)-1) as a HANDLE-typed function returns it: unsigned.
INVALID_HANDLE_VALUE: Final = ctypes.c_void_p(-1).value
#: ResumeThread's failure answer ((DWORD)-1).
RESUME_FAILED: Final = 0xFFFFFFFF
ERROR_MORE_DATA: Final = 234
ERROR_NO_MORE_FILES: Final = 18
#: Process creation flags (winbase.h; the same values as subprocess's on Windows).
CREATE_SUSPENDED: Final = 0x00000004
CREATE_NEW_PROCESS_GROUP: Final = 0x00000200
CREATE_NO_WINDOW: Final = 0x08000000
#: Room for this many pids in the first process list query.
FIRST_LISTED: Final = 1024
#: Queries with a grown buffer before giving up (the job grows between two).
LIST_ATTEMPTS: Final = 4


class _BasicLimits(ctypes.Structure):
    _fields_ = [
        ("PerProcessUserTimeLimit", ctypes.c_int64),
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", wintypes.DWORD),
        ("MinimumWorkingSetSize", ctypes.c_size_t),
        ("MaximumWorkingSetSize", ctypes.c_size_t),
        ("ActiveProcessLimit", wintypes.DWORD),
        ("Affinity", ctypes.c_size_t),
        ("PriorityClass", wintypes.DWORD),
        ("SchedulingClass", wintypes.DWORD),
    ]


class _IoCounters(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "ReadOperationCount",
            "WriteOperationCount",
            "OtherOperationCount",
            "ReadTransferCount",
            "WriteTransferCount",
            "OtherTransferCount",
        )
    ]


class _ExtendedLimits(ctypes.Structure):
    _fields_ = [
        ("BasicLimitInformation", _BasicLimits),
        ("IoInfo", _IoCounters),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    ]


class _Accounting(ctypes.Structure):
    _fields_ = [
        ("TotalUserTime", ctypes.c_int64),
        ("TotalKernelTime", ctypes.c_int64),
        ("ThisPeriodTotalUserTime", ctypes.c_int64),
        ("ThisPeriodTotalKernelTime", ctypes.c_int64),
        ("TotalPageFaultCount", wintypes.DWORD),
        ("TotalProcesses", wintypes.DWORD),
        ("ActiveProcesses", wintypes.DWORD),
        ("TotalTerminatedProcesses", wintypes.DWORD),
    ]


class ThreadEntry(ctypes.Structure):
    """THREADENTRY32 (tlhelp32.h)."""

    _fields_ = [
        ("dwSize", wintypes.DWORD),
        ("cntUsage", wintypes.DWORD),
        ("th32ThreadID", wintypes.DWORD),
        ("th32OwnerProcessID", wintypes.DWORD),
        ("tpBasePri", wintypes.LONG),
        ("tpDeltaPri", wintypes.LONG),
        ("dwFlags", wintypes.DWORD),
    ]


@functools.lru_cache(maxsize=8)
def pid_list_type(room: int) -> type[ctypes.Structure]:
    """JOBOBJECT_BASIC_PROCESS_ID_LIST with room for ``room`` pids (its array is variable)."""
    return type(
        f"_PidList{room}",
        (ctypes.Structure,),
        {
            "_fields_": [
                ("NumberOfAssignedProcesses", wintypes.DWORD),
                ("NumberOfProcessIdsInList", wintypes.DWORD),
                ("ProcessIdList", ctypes.c_size_t * room),
            ]
        },
    )


@dataclass(frozen=True)
class WinApi:
    """What the job code calls: kernel32's functions, its last error, the break signal."""

    kernel32: Any
    last_error: Callable[[], int]
    send_break: Callable[[int], None]

    def fail(self, what: str) -> OSError:
        code = self.last_error()
        return OSError(code, f"{what} failed (Windows error {code})")

    def check(self, ok: Any, what: str) -> None:
        if not ok:
            raise self.fail(what)

    def close(self, handle: int | None) -> None:
        if handle:
            self.kernel32.CloseHandle(handle)


class JobTrees:
    name: Final = "job object (KILL_ON_JOB_CLOSE, CTRL_BREAK_EVENT, TerminateJobObject)"

    def __init__(self, api: WinApi | None = None) -> None:
        self._api = api or windows_api()

    def popen_options(self) -> dict[str, Any]:
        flags = CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP
        if not self._api.kernel32.GetConsoleWindow():
            flags |= CREATE_NO_WINDOW
        return {"creationflags": flags}

    def adopt(self, popen: "subprocess.Popen[bytes]") -> Tree:
        return JobTree(popen.pid, self._api)

    def hold(self, strays: list[psutil.Process]) -> Held:
        # A dead tray's jobs died with it; what is left escaped them.
        return PsutilTrees().hold(strays)


class JobTree:
    polite: Final = "CTRL_BREAK_EVENT"
    hard: Final = "TerminateJobObject"

    def __init__(self, pid: int, api: WinApi) -> None:
        """Put the suspended child ``pid`` in a new job, then let it run; raises OSError."""
        self.pid = pid
        self.label = f"job of pid {pid}"
        self._api = api
        k32 = api.kernel32
        job = k32.CreateJobObjectW(None, None)
        api.check(job, "CreateJobObjectW")
        self._job: int | None = job
        try:
            limits = _ExtendedLimits()
            limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
            api.check(
                k32.SetInformationJobObject(
                    job,
                    JobObjectExtendedLimitInformation,
                    ctypes.addressof(limits),
                    ctypes.sizeof(limits),
                ),
                "SetInformationJobObject",
            )
            process = k32.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, False, pid)
            api.check(process, "OpenProcess")
            try:
                api.check(k32.AssignProcessToJobObject(job, process), "AssignProcessToJobObject")
            finally:
                api.close(process)
            _resume_threads(api, pid)
        except BaseException:
            self.release()
            raise

    def _query(self, kind: int, into: ctypes.Structure) -> bool:
        """QueryInformationJobObject of ``kind`` into ``into``; False once released."""
        if self._job is None:
            return False
        return bool(
            self._api.kernel32.QueryInformationJobObject(
                self._job, kind, ctypes.addressof(into), ctypes.sizeof(into), None
            )
        )

    def _pids(self) -> list[int]:
        room = FIRST_LISTED
        for _ in range(LIST_ATTEMPTS):
            listing: Any = pid_list_type(room)()
            ok = self._query(JobObjectBasicProcessIdList, listing)
            if not ok and (self._job is None or self._api.last_error() != ERROR_MORE_DATA):
                return []
            listed = min(int(listing.NumberOfProcessIdsInList), room)
            assigned = int(listing.NumberOfAssignedProcesses)
            if ok and listed >= assigned:
                return [int(listing.ProcessIdList[i]) for i in range(listed)]
            # Too small: room for all, and for the ones started since.
            room = max(room * 2, assigned + assigned // 4)
        return [int(listing.ProcessIdList[i]) for i in range(listed)]

    def snapshot(self) -> list[psutil.Process]:
        return procs.descendants(self.pid)

    def alive(self) -> bool:
        info = _Accounting()
        return self._query(JobObjectBasicAccountingInformation, info) and (info.ActiveProcesses > 0)

    def members(self) -> list[psutil.Process]:
        found = []
        for pid in self._pids():
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if procs.running(proc):
                    found.append(proc)
        return found

    def contains(self, proc: psutil.Process) -> bool:
        return proc.pid in self._pids()

    def terminate(self) -> None:
        with contextlib.suppress(OSError):
            self._api.send_break(self.pid)

    def kill(self) -> None:
        if self._job is not None:
            self._api.kernel32.TerminateJobObject(self._job, 1)

    def release(self) -> None:
        # Closing the last handle ends whatever is still in the job.
        if self._job is not None:
            self._api.close(self._job)
            self._job = None


def _resume_threads(api: WinApi, pid: int) -> None:
    """Resume every thread of ``pid`` (a process created suspended); raises OSError."""
    k32 = api.kernel32
    snapshot = k32.CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0)
    if not snapshot or snapshot in (-1, INVALID_HANDLE_VALUE):
        raise api.fail("CreateToolhelp32Snapshot")
    resumed = 0
    try:
        entry = ThreadEntry()
        entry.dwSize = ctypes.sizeof(entry)
        more = k32.Thread32First(snapshot, ctypes.addressof(entry))
        while more:
            if entry.th32OwnerProcessID == pid:
                thread = k32.OpenThread(THREAD_SUSPEND_RESUME, False, entry.th32ThreadID)
                api.check(thread, "OpenThread")
                try:
                    if k32.ResumeThread(thread) == RESUME_FAILED:
                        raise api.fail("ResumeThread")
                finally:
                    api.close(thread)
                resumed += 1
            more = k32.Thread32Next(snapshot, ctypes.addressof(entry))
    finally:
        api.close(snapshot)
    if not resumed:
        raise OSError(ERROR_NO_MORE_FILES, f"no thread of pid {pid} to resume")


def windows_api() -> WinApi:
    """The real kernel32 (Windows only)."""
    if sys.platform == "win32":
        return _real_api()
    raise OSError("job objects exist on Windows only")


if sys.platform == "win32":
    import signal

    @functools.cache
    def _real_api() -> WinApi:
        k32 = ctypes.WinDLL("kernel32", use_last_error=True)
        # Handles are pointer-sized: without these, ctypes would pass and return C ints.
        handle, dword, boolean = wintypes.HANDLE, wintypes.DWORD, wintypes.BOOL
        signatures: dict[str, tuple[Any, list[Any]]] = {
            "CreateJobObjectW": (handle, [ctypes.c_void_p, wintypes.LPCWSTR]),
            "SetInformationJobObject": (boolean, [handle, ctypes.c_int, ctypes.c_void_p, dword]),
            "QueryInformationJobObject": (
                boolean,
                [handle, ctypes.c_int, ctypes.c_void_p, dword, ctypes.c_void_p],
            ),
            "OpenProcess": (handle, [dword, boolean, dword]),
            "AssignProcessToJobObject": (boolean, [handle, handle]),
            "TerminateJobObject": (boolean, [handle, wintypes.UINT]),
            "CloseHandle": (boolean, [handle]),
            "GetConsoleWindow": (wintypes.HWND, []),
            "CreateToolhelp32Snapshot": (handle, [dword, dword]),
            "Thread32First": (boolean, [handle, ctypes.c_void_p]),
            "Thread32Next": (boolean, [handle, ctypes.c_void_p]),
            "OpenThread": (handle, [dword, boolean, dword]),
            "ResumeThread": (dword, [handle]),
        }
        for name, (restype, argtypes) in signatures.items():
            function = getattr(k32, name)
            function.restype = restype
            function.argtypes = argtypes
        return WinApi(k32, ctypes.get_last_error, lambda pid: os.kill(pid, signal.CTRL_BREAK_EVENT))
