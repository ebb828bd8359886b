"""The conversation pane: finished turns, the partial transcript being spoken, and PredGen's draft
with its accepted, rejected and newly drafted parts in distinct styles."""
from __future__ import annotations

from html import escape

from PySide6.QtWidgets import QTextBrowser, QWidget

from foresay.engine.events import AssistantIntro

from .conversation import ChatTurn, ConversationModel, DraftParts
from .theme import DRAFT_ACCEPTED, DRAFT_NEW, DRAFT_REJECTED, TENTATIVE


def turn_html(turn: ChatTurn) -> str:
    if turn.role == "user":
        return f'<p><b>You:</b> {escape(turn.text)}</p>'
    tags = []
    if turn.outcome:
        tags.append(f"speculation {escape(turn.outcome)}")
    if turn.interrupted:
        tags.append("interrupted")
    if not turn.done:
        tags.append("\u2026")
    tag = f' <span style="color:{TENTATIVE}; font-size:small;">[{", ".join(tags)}]</span>' if tags else ""
    return f'<p style="margin-left:16px;"><b>Foresay:</b> {escape(turn.text)}{tag}</p>'


def partial_html(committed: str, tentative: str) -> str:
    return (f'<p><b>You</b> <i>(speaking)</i>: {escape(committed)} '
            f'<span style="color:{TENTATIVE}; font-style:italic;">{escape(tentative)}</span></p>')


def draft_html(draft: DraftParts) -> str:
    parts = (f'<span style="color:{DRAFT_ACCEPTED}; background-color:#e6f4ea;">{escape(draft.accepted)}</span>'
             f'<span style="color:{DRAFT_REJECTED}; text-decoration:line-through;">{escape(draft.rejected)}</span>'
             f'{" " if draft.rejected and draft.new else ""}'
             f'<span style="color:{DRAFT_NEW}; font-style:italic; text-decoration:underline;">{escape(draft.new)}</span>')
    ready = f' <span style="color:{DRAFT_ACCEPTED};">\u2714 first sentence ready for the TTS</span>' if draft.first_sentence else ""
    said = f" \u2013 what you said {escape(draft.verdict)}" if draft.verdict in ("sounds finished", "sounds unfinished") \
        else ""
    legend = (f'<span style="font-size:small; color:{TENTATIVE};">draft{said}:'
              f' <span style="color:{DRAFT_ACCEPTED};">accepted</span> ·'
              f' <span style="color:{DRAFT_REJECTED}; text-decoration:line-through;">rejected</span> ·'
              f' <span style="color:{DRAFT_NEW}; font-style:italic;">new</span></span>')
    return f'<p style="margin-left:16px;">{legend}{ready}<br><b>Foresay</b> <i>(drafting)</i>: {parts}</p>'


def intro_html(intro: AssistantIntro) -> str:
    """The empty conversation's text for a chat model with a small domain: what it knows and
    questions to try."""
    if not intro.knows:
        return ""
    examples = "".join(f"<li>{escape(q)}</li>" for q in intro.examples)
    tried = f'<p>Try asking:</p><ul>{examples}</ul>' if examples else ""
    return f'<div style="color:{TENTATIVE};"><p>{escape(intro.knows)}</p>{tried}</div>'


MAX_SHOWN_TURNS = 200  # older turns stay in the model; redrawing them all would grow without bound


def conversation_html(model: ConversationModel) -> str:
    blocks = [turn_html(t) for t in model.turns[-MAX_SHOWN_TURNS:]]
    committed, tentative = model.live_user_text
    if not blocks and not (committed or tentative):
        blocks.append(intro_html(model.intro))
    if committed or tentative:
        blocks.append(partial_html(committed, tentative))
    draft = model.draft
    if draft.turn_id == model.current_turn and (draft.text or draft.rejected):
        blocks.append(draft_html(draft))
    return "".join(blocks)


class ConversationView(QTextBrowser):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setOpenLinks(False)
        self._shown_version = -1

    def refresh(self, model: ConversationModel) -> None:
        if model.version == self._shown_version:
            return
        self._shown_version = model.version
        bar = self.verticalScrollBar()
        at_bottom = bar.value() >= bar.maximum() - 4
        self.setHtml(conversation_html(model))
        if at_bottom:
            bar.setValue(bar.maximum())
