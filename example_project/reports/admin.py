from django.contrib import admin

from .models import Report


@admin.register(Report)
class ReportAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("id", "title", "status", "last_outcome", "builds", "updated_at")
    list_filter = ("status",)
    readonly_fields = ("status", "cancellation_requested", "last_outcome", "last_result", "builds")
