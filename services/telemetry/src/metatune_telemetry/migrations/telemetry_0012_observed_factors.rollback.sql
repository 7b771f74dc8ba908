ALTER TABLE observed_intensity DROP CONSTRAINT IF EXISTS observed_intensity_emission_factors;
ALTER TABLE observed_intensity DROP COLUMN IF EXISTS emission_factors;
