"""graph_schema"""
