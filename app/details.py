"""The details pane under the Servers table: the selected server whole.

What the table cuts short (the last error, the parked reason, the command)
wraps here, and what a person wants to know before pointing a client at the
server is listed: its tools, each with title, description and whether a call
cut by a crash is retried (core.supervision.offer, the call path's own
rule), and how many resources, resource templates and prompts it offers.
"""

import html
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.icons import state_icon
from app.models import ToolsModel
from app.sign_in import start_sign_in
from core.base.snapshot import ServerSnapshot
from core.supervision.offer import ServerOffer

#: Width of the summary column beside the tools table.
SUMMARY_WIDTH = 330
#: Side of the state glyph in the pane's title.
GLYPH_PX = 18


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def counts_text(offer: ServerOffer) -> str:
    """``3 tools · 1 resource · 0 resource templates · 1 prompt``."""
    if not offer.known and not offer.tools:
        return "Not listed yet: the server has not completed a handshake."
    return " · ".join(
        [
            _plural(len(offer.tools), "tool"),
            _plural(offer.resources, "resource"),
            _plural(offer.resource_templates, "resource template"),
            _plural(offer.prompts, "prompt"),
        ]
    )


RETRY_WORDS = {
    "safe": "tools marked readOnlyHint or idempotentHint are retried after a crash",
    "always": 'every call is retried after a crash ("retry": "always")',
    "never": 'no call is retried after a crash ("retry": "never")',
}


class DetailsPane(QWidget):
    def __init__(
        self,
        offer_of: Callable[[str], ServerOffer | None],
        config_path: Callable[[], str] = lambda: "",
    ) -> None:
        super().__init__()
        self._offer_of = offer_of
        self._config_path = config_path
        self.name: str | None = None
        #: What the pane shows now: (server, offer), or a value no pair equals.
        self._shown: tuple[ServerSnapshot | None, ServerOffer | None] | object = ()
        self.glyph = QLabel()
        self.title = QLabel()
        self.title.setStyleSheet("font-weight: bold; font-size: 110%;")
        self.facts = QLabel()
        self.facts.setWordWrap(True)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.problem.setStyleSheet(
            "background: #fff3cd; color: #5c4400; padding: 4px; border-radius: 3px;"
        )
        self.command = QLabel()
        self.command.setWordWrap(True)
        self.command.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.counts = QLabel()
        self.counts.setWordWrap(True)
        self.retry = QLabel()
        self.retry.setWordWrap(True)
        self.retry.setStyleSheet("color: gray;")
        # A remote server's sign-in, in the browser (mcp-tray login in a process of its own).
        self.sign_in = QPushButton("Sign in…")
        self.sign_in.setToolTip("Sign in to this remote server in your browser")
        self.sign_in.clicked.connect(self._sign_in)
        self.sign_in.hide()
        self.sign_in_note = QLabel()
        self.sign_in_note.setWordWrap(True)

        self.tools = ToolsModel()
        self.tools_view = QTableView()
        self.tools_view.setModel(self.tools)
        self.tools_view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.tools_view.verticalHeader().setVisible(False)
        self.tools_view.setWordWrap(True)
        self.tools_view.setAlternatingRowColors(True)
        # The short columns are fitted whenever the tool list changes (a
        # ResizeToContents header misses rows inserted after it was laid out);
        # the description takes the rest and wraps.
        self.tools_view.horizontalHeader().setSectionResizeMode(
            ToolsModel.column("description"), QHeaderView.ResizeMode.Stretch
        )
        self.tools.rowsInserted.connect(self._fit_columns)
        self.tools.rowsRemoved.connect(self._fit_columns)
        self._fit_columns()
        # A few tools, each a line or two: rows follow their wrapped description.
        self.tools_view.verticalHeader().setSectionResizeMode(
            QHeaderView.ResizeMode.ResizeToContents
        )

        title_row = QHBoxLayout()
        title_row.addWidget(self.glyph)
        title_row.addWidget(self.title, 1)
        summary = QVBoxLayout()
        summary.addLayout(title_row)
        summary.addWidget(self.facts)
        summary.addWidget(self.problem)
        summary.addWidget(self.command)
        summary.addWidget(self.counts)
        summary.addWidget(self.retry)
        summary.addWidget(self.sign_in)
        summary.addWidget(self.sign_in_note)
        summary.addStretch()
        left = QWidget()
        left.setLayout(summary)
        left.setFixedWidth(SUMMARY_WIDTH)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addWidget(left)
        layout.addWidget(self.tools_view, 1)
        self.show_server(None)

    def _sign_in(self) -> None:
        if self.name is None:
            return
        problem = start_sign_in(self.name, self._config_path())
        self.sign_in_note.setText(
            problem or f"Signing in to {self.name}: finish it in your browser."
        )

    def _fit_columns(self) -> None:
        for column in ("name", "title", "retried"):
            self.tools_view.resizeColumnToContents(ToolsModel.column(column))

    def show_server(self, server: ServerSnapshot | None) -> None:
        """Fill the pane for ``server`` (None: nothing selected).

        Called on every core change: what did not change is not touched.
        """
        offer = self._offer_of(server.name) if server is not None else None
        if (server, offer) == self._shown:
            return
        self._shown = (server, offer)
        if server is None:
            self.name = None
            self.sign_in.hide()
            self.sign_in_note.clear()
            self.glyph.clear()
            self.title.setText("No server selected")
            for label in (self.facts, self.command, self.counts, self.retry):
                label.clear()
            self.problem.hide()
            self.tools.set_rows([])
            return
        if server.name != self.name:
            self.sign_in_note.clear()
        self.name = server.name
        self.sign_in.setVisible(server.remote)
        self.glyph.setPixmap(state_icon(server.state).pixmap(GLYPH_PX, GLYPH_PX))
        self.title.setText(server.name)
        facts = [server.state.value, f"generation {server.generation}"]
        if server.pid is not None:
            facts.append(f"pid {server.pid}")
        elif server.remote:
            facts.append("remote")
        if server.protocol:
            facts.append(f"protocol {server.protocol}")
        facts.append(f"{server.sharing} child")
        if server.sandbox != "none":
            facts.append(f"sandbox: {server.sandbox}")
        self.facts.setText(" · ".join(facts))
        problem = (
            f"Parked: {server.parked_reason}"
            if server.parked_reason
            else (f"Last error: {server.last_error}" if server.last_error else "")
        )
        self.problem.setText(problem)
        self.problem.setVisible(bool(problem))
        self.command.setText(
            f"<b>{'URL' if server.remote else 'Command'}</b> {html.escape(server.command)}<br>"
            f"<b>Log</b> {html.escape(server.log_path)}"
        )
        if offer is None:
            self.counts.setText("")
            self.retry.setText("")
            self.tools.set_rows([])
            return
        self.counts.setText(counts_text(offer))
        self.retry.setText(
            f'"retry": "{offer.retry}": {RETRY_WORDS.get(offer.retry, offer.retry)}.'
        )
        self.tools.set_rows(offer.tools)
