"""The operator console (``/ops/``): a page for people who run the Runtime, over the ops API.

Its routes (``routes``: the page shell, its files, sign-in and sign-out), its pages' headers and
sign-in page (``pages``), its files (``static/``: plain ES modules and CSS), its signed cookie
(``cookie``) and what that cookie may do on ``/v1/ops/*`` (``access``). Its sign-ins are rows of
``console_sessions`` (``service.use_cases.console_sessions``, ``service.db.console_sessions``); what
it draws is the ops API's (``service.api.ops``), the overview included.
"""
