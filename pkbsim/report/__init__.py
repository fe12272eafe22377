"""Renderers: one AnalysisResult, several formats. Only the CLI writes what they return."""
