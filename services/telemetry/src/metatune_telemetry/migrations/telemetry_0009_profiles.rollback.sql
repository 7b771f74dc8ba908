DROP TABLE IF EXISTS study_profiles;
