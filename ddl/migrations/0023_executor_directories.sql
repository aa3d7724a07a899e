-- The export and reject directories each executor sees (issue 37), as the ids in their mark
-- files (`connectors/dirmarks.py`): an executor whose directories are not those of the live
-- executors refuses to start (`actors/presence.py`). NULL: an executor of an earlier version.
ALTER TABLE executors ADD COLUMN export_mark text, ADD COLUMN reject_mark text;
