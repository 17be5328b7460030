"""Windows: each child in a Job Object of its own.

The job is made with ``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE``: the tray holds
its only handle, so when the tray ends, however it ends (Quit, a crash,
Task Manager), Windows closes the handle and ends every process of the job
— the child and all it started, whatever psutil's stale parent links say.

- Spawn: ``CREATE_NEW_PROCESS_GROUP`` (so ``CTRL_BREAK_EVENT`` can address
  the child's group), then ``AssignProcessToJobObject``. Processes the child
  starts from then on are in the job; one started in the microseconds
  before the assignment is not (``subprocess`` cannot start a process
  suspended), and is found by its tag instead.
- The polite step is ``CTRL_BREAK_EVENT`` to the child's group. It reaches
  the child only when they share a console: a headless run in a terminal.
  The windowed tray has no console and starts children with
  ``CREATE_NO_WINDOW`` (else each would open a console window), so for them
  stdin EOF is the polite step, and the hard one comes after the grace.
- The hard step is ``TerminateJobObject``: the whole tree at once.

Defined on Windows only (the module imports everywhere, empty elsewhere);
``mypy --platform win32`` checks it.
"""

import sys

if sys.platform == "win32":
    import contextlib
    import ctypes
    import os
    import signal
    import subprocess
    from ctypes import wintypes
    from typing import Any, Final

    import psutil

    from core.platform import procs
    from core.platform.trees import Held, PsutilTrees, Tree

    _kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    # Handles are pointer-sized: without these, ctypes would pass and return C ints.
    _kernel32.CreateJobObjectW.restype = wintypes.HANDLE
    _kernel32.CreateJobObjectW.argtypes = [ctypes.c_void_p, wintypes.LPCWSTR]
    _kernel32.SetInformationJobObject.restype = wintypes.BOOL
    _kernel32.SetInformationJobObject.argtypes = [
        wintypes.HANDLE,
        ctypes.c_int,
        ctypes.c_void_p,
        wintypes.DWORD,
    ]
    _kernel32.QueryInformationJobObject.restype = wintypes.BOOL
    _kernel32.QueryInformationJobObject.argtypes = [
        wintypes.HANDLE,
        ctypes.c_int,
        ctypes.c_void_p,
        wintypes.DWORD,
        ctypes.c_void_p,
    ]
    _kernel32.OpenProcess.restype = wintypes.HANDLE
    _kernel32.OpenProcess.argtypes = [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]
    _kernel32.AssignProcessToJobObject.restype = wintypes.BOOL
    _kernel32.AssignProcessToJobObject.argtypes = [wintypes.HANDLE, wintypes.HANDLE]
    _kernel32.TerminateJobObject.restype = wintypes.BOOL
    _kernel32.TerminateJobObject.argtypes = [wintypes.HANDLE, wintypes.UINT]
    _kernel32.CloseHandle.restype = wintypes.BOOL
    _kernel32.CloseHandle.argtypes = [wintypes.HANDLE]
    _kernel32.GetConsoleWindow.restype = wintypes.HWND
    _kernel32.GetConsoleWindow.argtypes = []

    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: Final = 0x2000
    JobObjectBasicAccountingInformation: Final = 1
    JobObjectBasicProcessIdList: Final = 3
    JobObjectExtendedLimitInformation: Final = 9
    PROCESS_TERMINATE: Final = 0x0001
    PROCESS_SET_QUOTA: Final = 0x0100
    #: Room for this many pids in one process list query (more are listed as "and others").
    MAX_LISTED: Final = 1024

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

    class _PidList(ctypes.Structure):
        _fields_ = [
            ("NumberOfAssignedProcesses", wintypes.DWORD),
            ("NumberOfProcessIdsInList", wintypes.DWORD),
            ("ProcessIdList", ctypes.c_size_t * MAX_LISTED),
        ]

    def _check(ok: Any, what: str) -> None:
        if not ok:
            raise ctypes.WinError(ctypes.get_last_error(), what)

    def _has_console() -> bool:
        return bool(_kernel32.GetConsoleWindow())

    class JobTrees:
        name: Final = "job object (KILL_ON_JOB_CLOSE, CTRL_BREAK_EVENT, TerminateJobObject)"

        def popen_options(self) -> dict[str, Any]:
            flags = subprocess.CREATE_NEW_PROCESS_GROUP
            if not _has_console():
                flags |= subprocess.CREATE_NO_WINDOW
            return {"creationflags": flags}

        def adopt(self, popen: "subprocess.Popen[bytes]") -> Tree:
            return JobTree(popen.pid)

        def hold(self, strays: list[psutil.Process]) -> Held:
            # A dead tray's jobs died with it; what is left escaped them.
            return PsutilTrees().hold(strays)

    class JobTree:
        polite: Final = "CTRL_BREAK_EVENT"
        hard: Final = "TerminateJobObject"

        def __init__(self, pid: int) -> None:
            self.pid = pid
            self.label = f"job of pid {pid}"
            job = _kernel32.CreateJobObjectW(None, None)
            _check(job, "CreateJobObjectW")
            self._job: int | None = job
            limits = _ExtendedLimits()
            limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
            _check(
                _kernel32.SetInformationJobObject(
                    job,
                    JobObjectExtendedLimitInformation,
                    ctypes.byref(limits),
                    ctypes.sizeof(limits),
                ),
                "SetInformationJobObject",
            )
            process = _kernel32.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, False, pid)
            _check(process, "OpenProcess")
            try:
                _check(_kernel32.AssignProcessToJobObject(job, process), "AssignProcessToJobObject")
            finally:
                _kernel32.CloseHandle(process)

        def _query(self, kind: int, into: ctypes.Structure) -> bool:
            """QueryInformationJobObject of ``kind`` into ``into``; False once released."""
            if self._job is None:
                return False
            return bool(
                _kernel32.QueryInformationJobObject(
                    self._job, kind, ctypes.byref(into), ctypes.sizeof(into), None
                )
            )

        def _pids(self) -> list[int]:
            listing = _PidList()
            if not self._query(JobObjectBasicProcessIdList, listing):
                return []
            count = listing.NumberOfProcessIdsInList
            return [int(listing.ProcessIdList[i]) for i in range(count)]

        def snapshot(self) -> list[psutil.Process]:
            return procs.descendants(self.pid)

        def alive(self) -> bool:
            info = _Accounting()
            return self._query(JobObjectBasicAccountingInformation, info) and (
                info.ActiveProcesses > 0
            )

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
                os.kill(self.pid, signal.CTRL_BREAK_EVENT)

        def kill(self) -> None:
            if self._job is not None:
                _kernel32.TerminateJobObject(self._job, 1)

        def release(self) -> None:
            # Closing the last handle ends whatever is still in the job.
            if self._job is not None:
                _kernel32.CloseHandle(self._job)
                self._job = None
