"""The window's Approvals tab: held calls and changed tools, and the person's answers.

docs/design.md §3.14. The list shows what waits (a call: client, server,
tool, arguments; a changed tool: what changed), oldest first, from the
snapshot core sends. Below it, the selected item: a call's arguments, or a
changed tool as approved and as the server lists it now, side by side.
The buttons answer: Allow once, Allow for this session, Always allow, Deny
(a changed tool takes only Approve change). The "Always allowed" list below
takes a Revoke.

The tab is the held calls' asker (core.serving.calls.approvals): a held call, on
core's loop, starts ``prompt`` on the GUI loop (``run_coroutine_threadsafe``)
and awaits it (``wrap_future``); the person's click is the prompt's answer,
which core applies as it would the CLI's. Where no prompt waits (a changed
tool, a call held before the tab listened, Revoke) the click's coroutine
awaits core's own answer through the link. Either way the GUI thread never
blocks, and what core said, or its error, goes to the status bar.
"""

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Final

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core_link import CoreLink
from core.base.snapshot import ApprovalSnapshot, TraySnapshot
from core.base.verdict import Scope

COLUMNS: Final = ("Waiting", "Client", "Server", "Tool", "Arguments / change", "Since")
#: The arguments column shows this much; the pane below shows them whole.
SHOWN_ARGUMENTS: Final = 80
#: Height of the "Always allowed" list, in pixels.
GRANTS_HEIGHT: Final = 110
#: Reports the outcome of an answer (the window's status bar).
Report = Callable[[str], None]


def _json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


class Prompter:
    """The prompts core's held calls await, by id; plain Python, not Qt: core's thread
    holds ``ask``, and whatever it may free last must not be a widget."""

    def __init__(self, gui_loop: asyncio.AbstractEventLoop) -> None:
        self.gui_loop = gui_loop
        self.waiting: dict[str, asyncio.Future[Scope | None]] = {}

    def ask(self, item: ApprovalSnapshot) -> "asyncio.Future[Scope | None]":
        """On core's loop: the prompt started on the GUI loop, as a future of core's loop."""
        asked = asyncio.run_coroutine_threadsafe(self.prompt(item), self.gui_loop)
        return asyncio.wrap_future(asked, loop=asyncio.get_running_loop())

    async def prompt(self, item: ApprovalSnapshot) -> Scope | None:
        """On the GUI loop: until the person answers ``item`` (None: Deny)."""
        answer: asyncio.Future[Scope | None] = self.gui_loop.create_future()
        self.waiting[item.id] = answer
        try:
            return await answer
        finally:
            if self.waiting.get(item.id) is answer:
                del self.waiting[item.id]


class ApprovalsTab(QWidget):
    def __init__(self, link: CoreLink, report: Report) -> None:
        super().__init__()
        self.link = link
        self.report = report
        self.items: dict[str, ApprovalSnapshot] = {}
        #: What core's held calls await (core holds its ``ask``).
        self.prompter = Prompter(link.gui_loop)
        #: Held calls awaiting the person here, by id: their futures on the GUI loop.
        self.prompts = self.prompter.waiting
        self._busy = False

        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(
            COLUMNS.index("Arguments / change"), QHeaderView.ResizeMode.Stretch
        )
        self.table.itemSelectionChanged.connect(self._show_selected)
        self.empty = QLabel("Nothing waits for your approval.")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)

        self.reason = QLabel()
        self.reason.setWordWrap(True)
        self.before = QPlainTextEdit()
        self.after = QPlainTextEdit()
        self.before_title = QLabel("As approved")
        self.after_title = QLabel("Arguments")
        sides = QHBoxLayout()
        for label, pane in ((self.before_title, self.before), (self.after_title, self.after)):
            pane.setReadOnly(True)
            column = QVBoxLayout()
            column.addWidget(label)
            column.addWidget(pane)
            sides.addLayout(column)

        self.allow_once = QPushButton("Allow once")
        self.allow_session = QPushButton("Allow for this session")
        self.allow_always = QPushButton("Always allow")
        self.deny_button = QPushButton("Deny")
        buttons = QHBoxLayout()
        for button in (self.allow_once, self.allow_session, self.allow_always, self.deny_button):
            buttons.addWidget(button)
        buttons.addStretch()
        self.allow_once.clicked.connect(lambda: self._approve("once"))
        self.allow_session.clicked.connect(lambda: self._approve("session"))
        self.allow_always.clicked.connect(lambda: self._approve("always"))
        self.deny_button.clicked.connect(self._deny)

        self.grants = QListWidget()
        # A few lines: the held calls above are what the person came for.
        self.grants.setMaximumHeight(GRANTS_HEIGHT)
        self.revoke_button = QPushButton("Revoke")
        self.revoke_button.clicked.connect(self._revoke)
        grants_row = QHBoxLayout()
        grants_row.addWidget(QLabel("Always allowed:"))
        grants_row.addWidget(self.revoke_button)
        grants_row.addStretch()

        detail = QWidget()
        below = QVBoxLayout(detail)
        below.addWidget(self.reason)
        below.addLayout(sides)
        below.addLayout(buttons)
        below.addLayout(grants_row)
        below.addWidget(self.grants)
        top = QWidget()
        above = QVBoxLayout(top)
        above.addWidget(self.empty)
        above.addWidget(self.table)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(top)
        split.addWidget(detail)
        layout = QVBoxLayout(self)
        layout.addWidget(split)
        link.changed.connect(self.refresh)
        self.refresh(link.snapshot())
        link.post(setattr, link.service.approvals, "asker", self.prompter.ask)

    def close_down(self) -> None:
        """Held calls stop asking this tab (the CLI and the API still answer them)."""
        approvals = self.link.service.approvals
        asker = self.prompter.ask

        def unlisten() -> None:
            if approvals.asker == asker:
                approvals.asker = None

        # Waited for, as the link's own unsubscribe is: once the window is gone, core's
        # thread must hold nothing of the GUI's (it could free it off the GUI thread).
        # A core already stopped holds nothing any more.
        with contextlib.suppress(RuntimeError):
            self.link.call(unlisten)

    # ------------------------------------------------------------ updates

    def refresh(self, snapshot: TraySnapshot, kinds: object = None) -> None:
        chosen = self.current()
        self.items = {item.id: item for item in snapshot.approvals}
        self.table.setRowCount(len(snapshot.approvals))
        for row, item in enumerate(snapshot.approvals):
            for column, value in enumerate(self._cells(item)):
                cell = QTableWidgetItem(value)
                cell.setData(Qt.ItemDataRole.UserRole, item.id)
                self.table.setItem(row, column, cell)
        self.table.resizeColumnsToContents()
        self.empty.setVisible(not snapshot.approvals)
        self.table.setVisible(bool(snapshot.approvals))
        keep = chosen if chosen in self.items else next(iter(self.items), None)
        if keep is not None:
            self.select(keep)
        self._show_selected()
        self.grants.clear()
        for grant in snapshot.grants:
            entry = QListWidgetItem(f"{grant.tool} on {grant.server} (since {grant.since})")
            entry.setData(Qt.ItemDataRole.UserRole, (grant.server, grant.tool))
            self.grants.addItem(entry)
        self.revoke_button.setEnabled(not self._busy and bool(snapshot.grants))

    @staticmethod
    def _cells(item: ApprovalSnapshot) -> tuple[str, ...]:
        if item.kind == "call":
            shown = json.dumps(dict(item.arguments), ensure_ascii=False)
            if len(shown) > SHOWN_ARGUMENTS:
                shown = shown[: SHOWN_ARGUMENTS - 1] + "…"
            return ("call", item.client, item.server, item.tool, shown, item.since)
        return ("changed tool", "—", item.server, item.tool, item.reason, item.since)

    def current(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        return self._key(rows[0].row())

    def _key(self, row: int) -> str | None:
        cell = self.table.item(row, 0)
        key = cell.data(Qt.ItemDataRole.UserRole) if cell is not None else None
        return key if isinstance(key, str) else None

    def select(self, approval_id: str) -> None:
        for row in range(self.table.rowCount()):
            if self._key(row) == approval_id:
                self.table.selectRow(row)
                return

    def _show_selected(self) -> None:
        item = self.items.get(self.current() or "")
        call = item is None or item.kind == "call"
        idle = not self._busy
        for button in (self.allow_session, self.allow_always, self.deny_button):
            button.setEnabled(idle and item is not None and call)
        self.allow_once.setEnabled(idle and item is not None)
        self.allow_once.setText("Allow once" if call else "Approve change")
        self.before.setVisible(not call)
        self.before_title.setVisible(not call)
        if item is None:
            self.reason.setText("")
            self.after.setPlainText("")
            return
        if call:
            self.reason.setText(
                f"{item.client} wants to call {item.tool!r} on {item.server!r}. "
                f"Asked because of {item.reason}."
            )
            self.after_title.setText("Arguments")
            self.after.setPlainText(_json(dict(item.arguments)))
        else:
            self.reason.setText(
                f"Tool {item.tool!r} of {item.server!r} changed: {item.reason}. It is kept from "
                "every client until you approve the change."
            )
            self.after_title.setText("Now listed")
            self.before.setPlainText(_json(dict(item.old or {})))
            self.after.setPlainText(_json(dict(item.new or {})))

    # ------------------------------------------------------------ answers

    def _approve(self, scope: Scope) -> None:
        chosen = self.current()
        if chosen is not None:
            self.link.spawn(self.answer(chosen, scope))

    def _deny(self) -> None:
        chosen = self.current()
        if chosen is not None:
            self.link.spawn(self.answer(chosen, None))

    async def answer(self, approval_id: str, scope: Scope | None) -> None:
        """The person's answer: to the prompt the held call awaits, else to core, awaited."""
        prompt = self.prompts.get(approval_id)
        if prompt is not None and not prompt.done():
            prompt.set_result(scope)
            self.report("denied" if scope is None else f"allowed ({scope})")
            return
        approvals = self.link.service.approvals

        async def deny() -> str:
            return approvals.deny(approval_id)

        asked = deny() if scope is None else approvals.approve(approval_id, scope)
        await self._ask_core(self.link.ask(asked))

    def _revoke(self) -> None:
        if self.grants.count() == 0:
            return
        entry = self.grants.currentItem() or self.grants.item(0)
        server, tool = entry.data(Qt.ItemDataRole.UserRole)
        approvals = self.link.service.approvals

        async def revoke() -> str:
            if await approvals.revoke(server, tool):
                return f"{tool} on {server}: asked again from now on"
            return f"{tool} on {server} was not always allowed (any more)"

        self._set_busy(True)
        self.link.spawn(self._ask_core(self.link.ask(revoke())))

    async def _ask_core(self, asked: Awaitable[str]) -> None:
        """Await core's answer, the buttons idle meanwhile; what it said, or why not, shown."""
        self._set_busy(True)
        try:
            said = await asked
        except Exception as exc:
            self.report(str(exc))
        else:
            self.report(said)
        finally:
            self._set_busy(False)

    def _set_busy(self, busy: bool) -> None:
        self._busy = busy
        self.revoke_button.setEnabled(not busy and self.grants.count() > 0)
        self._show_selected()
