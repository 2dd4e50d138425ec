"""kskill"""
