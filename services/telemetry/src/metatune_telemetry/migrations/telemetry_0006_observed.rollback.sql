DROP TABLE IF EXISTS observed_intensity;
