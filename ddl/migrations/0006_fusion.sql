-- Stage fusion (dag/fusion.py): a follower's attempt runs inside its head's attempt, on the
-- same executor and lease; and a fused step's output is stored only when a step outside
-- its group reads it, so a resumed dependent knows whether to read it or recompute it.
ALTER TABLE attempts ADD COLUMN fused_into bigint REFERENCES attempts (id);
ALTER TABLE step_runs ADD COLUMN output_kept boolean NOT NULL DEFAULT true;
CREATE INDEX attempts_fused ON attempts (fused_into) WHERE fused_into IS NOT NULL;
