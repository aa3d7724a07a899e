-- The export and reject directories (the ids of their marks, `connectors/dirmarks.py`) the
-- executor that claimed an attempt saw (issue 37): a later attempt of the step is claimed
-- only by an executor that sees the same ones, where the step's chunks are staged
-- (`actors/leases.py`). NULL: claimed by an executor that announced no marks.
ALTER TABLE attempts ADD COLUMN export_mark text, ADD COLUMN reject_mark text;
