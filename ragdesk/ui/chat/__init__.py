"""The conversation's widgets, one module per concern: :mod:`.view` (``ChatView``, the
scrolling column), :mod:`.card` (``AnswerCard``, one exchange), :mod:`.token_text`
(``TokenText``, the streamed answer and its tooltips), :mod:`.legend`, :mod:`.chip`
(``CitationChip``) and :mod:`.empty_state`. Texts they share with the heat map, the
inspector and the index menu are in :mod:`ragdesk.ui.texts`."""
